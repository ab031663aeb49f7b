import { AbortPrompt } from "./abort_prompt.tsx";
import { Pick } from "./pick.tsx";
import { TableHead } from "./table_head.tsx";
import { useSignal } from "@preact/signals";
import type { LiveRow } from "../../api_types.ts";
import type { Aborts } from "../aborts.ts";
import { formatMs, formatTokens, plural, stateLabel } from "../format.ts";
import type { LiveFeed } from "../live_feed.ts";
import {
  ALL_LIVE,
  choices,
  type LiveView,
  stateTotals,
  tokensPerSecond,
  viewRows,
} from "../live_view.ts";

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

/** The requests running now, pushed by the gateway: filters, totals per state, abort buttons. */
export function LiveRequests({ feed, aborts }: LiveRequestsProps) {
  const view = useSignal<LiveView>(ALL_LIVE);
  const all = feed.snapshot.value?.requests ?? [];
  const rows = viewRows(all, view.value);
  const totals = stateTotals(all);
  return (
    <section aria-labelledby="live-title">
      <header class="panel-head">
        <h2 id="live-title">Live requests</h2>
        <span class={`feed ${feed.status.value}`}>{FEED_LABELS[feed.status.value]}</span>
      </header>
      <AbortPrompt aborts={aborts} />
      {all.length === 0 ? <p class="empty">No request is running.</p> : (
        <>
          <p class="totals" aria-label="Requests by state">
            {plural(all.length, "request")}
            {totals.map(([state, n]) => <span key={state}>{` · ${n} ${stateLabel(state)}`}</span>)}
          </p>
          <LiveFilters rows={all} view={view.value} onChange={(v) => (view.value = v)} />
          {rows.length === 0
            ? <p class="empty">No running request matches.</p>
            : (
              <table class="cards live">
                <TableHead
                  columns={[
                    "Request",
                    "Session",
                    "Route",
                    "Upstream",
                    "State",
                    "Elapsed",
                    "First content",
                    "Idle for",
                    "Tokens",
                    <span key="abort" class="visually-hidden">Abort</span>,
                  ]}
                />
                <tbody>
                  {rows.map((row) => <LiveRowView key={row.id} row={row} aborts={aborts} />)}
                </tbody>
              </table>
            )}
        </>
      )}
    </section>
  );
}

function LiveFilters(
  props: { rows: LiveRow[]; view: LiveView; onChange: (view: LiveView) => void },
) {
  const { view } = props;
  const set = (name: keyof LiveView) => (e: { currentTarget: { value: string } }) =>
    props.onChange({ ...view, [name]: e.currentTarget.value });
  const pick = (label: string, name: "route" | "upstream", values: string[]) => (
    <Pick label={label} name={`live-${name}`} value={view[name]} onChange={set(name)}>
      {values.map((v) => <option key={v} value={v}>{v}</option>)}
    </Pick>
  );
  return (
    <form
      class="filters"
      aria-label="Filter live requests"
      onSubmit={(e) => e.preventDefault()}
    >
      {pick("Route", "route", choices(props.rows, (r) => r.route))}
      {pick("Upstream", "upstream", choices(props.rows, (r) => r.upstream))}
      <Pick label="State" name="live-state" value={view.state} onChange={set("state")}>
        {choices(props.rows, (r) => r.state).map((s) => (
          <option key={s} value={s}>{stateLabel(s)}</option>
        ))}
      </Pick>
      <label>
        Session<input name="live-session" value={view.session} onInput={set("session")} />
      </label>
      <label>
        Order
        <select name="live-sort" value={view.sort} onChange={set("sort")}>
          <option value="oldest">oldest first</option>
          <option value="newest">newest first</option>
          <option value="idle">longest idle first</option>
        </select>
      </label>
    </form>
  );
}

function LiveRowView({ row, aborts }: { row: LiveRow; aborts: Aborts }) {
  const rate = tokensPerSecond(row);
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
                onClick={() => aborts.ask("session", row.sessionId ?? "")}
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
      <td data-label="First content">{formatMs(row.firstContentMs)}</td>
      <td data-label="Idle for">{row.idleMs === null ? "no content yet" : formatMs(row.idleMs)}</td>
      <td data-label="Tokens">
        {formatTokens(row.inputTokens, row.outputTokens)}
        {rate !== null && <small>{rate.toFixed(1)} tokens/s</small>}
      </td>
      <td>
        <button
          type="button"
          class="danger"
          aria-label={`Abort request ${row.id}`}
          disabled={row.aborting}
          onClick={() => aborts.ask("request", row.id)}
        >
          Abort
        </button>
      </td>
    </tr>
  );
}
