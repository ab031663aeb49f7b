import { AbortPrompt } from "./abort_prompt.tsx";
import { Pick } from "./pick.tsx";
import { TableHead } from "./table_head.tsx";
import type { LiveSnapshot } from "../../api_types.ts";
import type { Aborts } from "../aborts.ts";
import { formatMs, formatTokens, plural, stateLabel } from "../format.ts";
import type { LiveFeed } from "../live_feed.ts";
import {
  ALL_LIVE,
  ALL_STATES,
  type LiveView,
  pageRange,
  stateTotals,
  tokensPerSecond,
} from "../live_view.ts";
import type { LiveRow } from "../../api_types.ts";

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

/**
 * The requests running now on every instance, one page at a time as the gateway filters, orders
 * and pages them (docs/admin.md "Live requests"): search, filters, totals per state, paging,
 * abort buttons. The page renders at most one page of rows, whatever runs.
 */
export function LiveRequests({ feed, aborts }: LiveRequestsProps) {
  const snapshot = feed.snapshot.value;
  const view = feed.view.value;
  const rows = snapshot?.requests ?? [];
  const filtered = JSON.stringify(view) !== JSON.stringify(ALL_LIVE);
  const running = snapshot?.totals.running ?? 0;
  return (
    <section aria-labelledby="live-title">
      <header class="panel-head">
        <h2 id="live-title">Live requests</h2>
        <span class={`feed ${feed.status.value}`}>{FEED_LABELS[feed.status.value]}</span>
      </header>
      <AbortPrompt aborts={aborts} />
      {snapshot && <Instances snapshot={snapshot} />}
      {running === 0 && !filtered ? <p class="empty">No request is running.</p> : (
        <>
          {snapshot && running > 0 && <CountLine snapshot={snapshot} filtered={filtered} />}
          <LiveFilters
            snapshot={snapshot}
            view={view}
            onChange={(v) => feed.setView(v)}
          />
          {rows.length === 0
            ? (
              <p class="empty">
                {running === 0 ? "No request is running." : "No running request matches."}
              </p>
            )
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
                  {rows.map((row) => (
                    <LiveRowView
                      key={`${row.instance}/${row.id}`}
                      row={row}
                      aborts={aborts}
                      fleet={(snapshot?.instances.total ?? 1) > 1}
                    />
                  ))}
                </tbody>
              </table>
            )}
          {snapshot && <LivePager feed={feed} snapshot={snapshot} />}
        </>
      )}
    </section>
  );
}

/** With several instances: how many answered, and which did not (their rows are missing). */
function Instances({ snapshot }: { snapshot: LiveSnapshot }) {
  const { total, silent } = snapshot.instances;
  if (total <= 1) return null;
  const answering = total - silent.length;
  return (
    <p class={`instances${silent.length ? " notice error" : ""}`} aria-label="Instances">
      {`${answering} of ${total} instances`}
      {silent.length > 0 && ` · not answering: ${silent.join(", ")}`}
    </p>
  );
}

/** How many match and how many run, by state, over the instances that answered. */
function CountLine({ snapshot, filtered }: { snapshot: LiveSnapshot; filtered: boolean }) {
  const { running, matching, states } = snapshot.totals;
  const head = filtered
    ? `${matching.toLocaleString("en")} of ${plural(running, "request")} match`
    : plural(running, "request");
  return (
    <p class="totals" aria-label="Requests by state">
      {head}
      {stateTotals(states).map(([state, n]) => (
        <span key={state}>{` · ${n} ${stateLabel(state)}`}</span>
      ))}
    </p>
  );
}

function LivePager({ feed, snapshot }: { feed: LiveFeed; snapshot: LiveSnapshot }) {
  const atStart = feed.trail.value.length === 0;
  if (atStart && !snapshot.page.next) return null;
  return (
    <nav class="pager" aria-label="Live request pages">
      <button type="button" disabled={atStart} onClick={() => feed.first()}>
        ⇤ First
      </button>
      <button type="button" disabled={atStart} onClick={() => feed.previous()}>
        ← Previous
      </button>
      <span aria-live="polite">{pageRange(snapshot)}</span>
      <button type="button" disabled={!snapshot.page.next} onClick={() => feed.next()}>
        Next →
      </button>
    </nav>
  );
}

function LiveFilters(
  props: { snapshot: LiveSnapshot | null; view: LiveView; onChange: (view: LiveView) => void },
) {
  const { view, snapshot } = props;
  const set = (name: keyof LiveView) => (e: { currentTarget: { value: string } }) =>
    props.onChange({ ...view, [name]: e.currentTarget.value });
  const pick = (label: string, name: "route" | "upstream", values: string[]) => (
    <Pick label={label} name={`live-${name}`} value={view[name]} onChange={set(name)}>
      {values.map((v) => <option key={v} value={v}>{v}</option>)}
    </Pick>
  );
  const instances = snapshot?.instances.ids ?? [];
  return (
    <form
      class="filters"
      aria-label="Filter live requests"
      role="search"
      onSubmit={(e) => e.preventDefault()}
    >
      <label>
        Search
        <input
          type="search"
          name="live-q"
          value={view.q}
          maxLength={200}
          placeholder="request, session or key id"
          onInput={set("q")}
        />
      </label>
      {pick("Route", "route", snapshot?.choices.routes ?? [])}
      {pick("Upstream", "upstream", snapshot?.choices.upstreams ?? [])}
      <Pick label="State" name="live-state" value={view.state} onChange={set("state")}>
        {ALL_STATES.map((s) => <option key={s} value={s}>{stateLabel(s)}</option>)}
      </Pick>
      <label>
        Session<input name="live-session" value={view.session} onInput={set("session")} />
      </label>
      {instances.length > 1 && (
        <Pick
          label="Instance"
          name="live-instance"
          value={view.instance}
          onChange={set("instance")}
        >
          {instances.map((id) => <option key={id} value={id}>{id}</option>)}
        </Pick>
      )}
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

function LiveRowView(
  { row, aborts, fleet }: { row: LiveRow; aborts: Aborts; fleet: boolean },
) {
  const rate = tokensPerSecond(row);
  return (
    <tr data-request-id={row.id} data-instance={row.instance}>
      <td data-label="Request">
        <code>{row.id}</code>
        <small>
          {row.clientFormat}
          {row.stream ? " · stream" : ""}
          {row.keyId ? ` · key ${row.keyId}` : ""}
          {fleet ? ` · instance ${row.instance}` : ""}
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
