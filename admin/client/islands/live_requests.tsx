import type { LiveRow } from "../../api_types.ts";
import type { Aborts } from "../aborts.ts";
import { formatMs, formatTokens, stateLabel } from "../format.ts";
import type { LiveFeed } from "../live_feed.ts";

export interface LiveRequestsProps {
  feed: LiveFeed;
  aborts: Aborts;
}

const FEED_LABELS = {
  idle: "not connected",
  connecting: "connecting…",
  open: "live",
  retrying: "reconnecting…",
} as const;

/** The requests running now, pushed by the gateway, each with its abort buttons. */
export function LiveRequests({ feed, aborts }: LiveRequestsProps) {
  const snapshot = feed.snapshot.value;
  const rows = snapshot?.requests ?? [];
  const result = aborts.result.value;
  return (
    <section aria-labelledby="live-title">
      <header class="panel-head">
        <h2 id="live-title">Live requests</h2>
        <span class={`feed ${feed.status.value}`}>{FEED_LABELS[feed.status.value]}</span>
      </header>
      {result && <p class={`notice ${result.ok ? "ok" : "error"}`} role="status">{result.text}</p>}
      {rows.length === 0 ? <p class="empty">No request is running.</p> : (
        <table class="cards live">
          <thead>
            <tr>
              <th>Request</th>
              <th>Session</th>
              <th>Route</th>
              <th>Upstream</th>
              <th>State</th>
              <th>Elapsed</th>
              <th>Idle for</th>
              <th>Tokens</th>
              <th></th>
            </tr>
          </thead>
          <tbody>{rows.map((row) => <LiveRowView key={row.id} row={row} aborts={aborts} />)}</tbody>
        </table>
      )}
    </section>
  );
}

function LiveRowView({ row, aborts }: { row: LiveRow; aborts: Aborts }) {
  return (
    <tr data-request-id={row.id}>
      <td data-label="Request">
        <code>{row.id}</code>
        <small>
          {row.clientFormat}
          {row.stream ? " · stream" : ""}
          {row.keyId ? ` · key ${row.keyId}` : ""}
        </small>
      </td>
      <td data-label="Session">
        {row.sessionId
          ? (
            <span class="session">
              <code>{row.sessionId}</code>
              <button
                type="button"
                class="danger quiet"
                aria-label={`Abort session ${row.sessionId}`}
                title="Stops the requests with this session id under every key"
                onClick={() => aborts.abortSession(row.sessionId ?? "")}
              >
                Abort session
              </button>
            </span>
          )
          : "—"}
      </td>
      <td data-label="Route">{row.route ?? "—"}</td>
      <td data-label="Upstream">
        {row.upstream ? `${row.upstream} (hop ${row.hop})` : "not picked yet"}
      </td>
      <td data-label="State">
        <span class={`state ${row.state}`}>
          {row.aborting ? "aborting" : stateLabel(row.state)}
        </span>
      </td>
      <td data-label="Elapsed">{formatMs(row.elapsedMs)}</td>
      <td data-label="Idle for">{row.idleMs === null ? "no content yet" : formatMs(row.idleMs)}</td>
      <td data-label="Tokens">{formatTokens(row.inputTokens, row.outputTokens)}</td>
      <td>
        <button
          type="button"
          class="danger"
          aria-label={`Abort request ${row.id}`}
          disabled={row.aborting}
          onClick={() => aborts.abortRequest(row.id)}
        >
          Abort
        </button>
      </td>
    </tr>
  );
}
