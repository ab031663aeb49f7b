import { Pick } from "./pick.tsx";
import { TableHead } from "./table_head.tsx";
import { useSignal } from "@preact/signals";
import type {
  AttemptRecord,
  HistoryChoices,
  HistoryOutcome,
  HistoryRow,
  RequestDetail,
} from "../../api_types.ts";
import type { HistoryFilters } from "../api.ts";
import { formatMs, formatTokens, parseLocalDateTime, plural } from "../format.ts";
import { formatUsd } from "../money.ts";
import type { History as HistoryModel } from "../history_model.ts";
import { layoutTimeline } from "../timeline.ts";
import { AttemptTimeline } from "./attempt_timeline.tsx";
import { DetailDialog } from "./detail_dialog.tsx";
import { Time } from "./time.tsx";
import { formatBytes, type Retention } from "../retention_model.ts";

export interface HistoryProps {
  history: HistoryModel;
  now: () => number;
  /** What history keeps and from when; the line is left out without it. */
  retention?: Retention;
}

/** Recorded requests, newest first, with filters, keyset pages and each attempt chain. */
export function History({ history, now, retention }: HistoryProps) {
  const page = history.page.value;
  const rows = page?.requests ?? [];
  const clock = now();
  return (
    <section aria-labelledby="history-title">
      <header class="panel-head">
        <h2 id="history-title">History</h2>
        <button
          type="button"
          class="quiet"
          onClick={() => {
            void history.refresh();
            void retention?.refresh();
          }}
        >
          Refresh
        </button>
      </header>
      {retention && <RetentionLine retention={retention} now={clock} />}
      <FilterForm
        choices={page?.choices ?? NO_CHOICES}
        onSearch={(filters) => history.search(filters)}
      />
      {history.error.value && <p class="notice error" role="alert">{history.error.value}</p>}
      {page && rows.length === 0 && <p class="empty">No request matches.</p>}
      {rows.length > 0 && (
        <table class="cards history">
          <TableHead
            columns={[
              "Started",
              "Request",
              "Route",
              "Session",
              "Attempts",
              "Result",
              "Duration",
              "Tokens",
              "Cost",
            ]}
          />
          <tbody>
            {rows.map((row) => (
              <HistoryRowView
                key={row.id}
                row={row}
                now={clock}
                onOpen={() => history.open(row.id)}
              />
            ))}
          </tbody>
        </table>
      )}
      <nav class="pager" aria-label="History pages">
        <button
          type="button"
          disabled={history.trail.value.length <= 1 || history.loading.value}
          onClick={() => history.newer()}
        >
          ← Newer
        </button>
        <span>Page {history.trail.value.length}</span>
        <button
          type="button"
          disabled={!page?.next || history.loading.value}
          onClick={() => history.older()}
        >
          Older →
        </button>
      </nav>
      {history.detailError.value && (
        <p class="notice error" role="alert">{history.detailError.value}</p>
      )}
      {history.detail.value && (
        <Detail
          detail={history.detail.value}
          now={clock}
          onClose={() => history.close()}
        />
      )}
    </section>
  );
}

/** What history keeps and from when (docs/admin.md "History"). */
export function RetentionLine({ retention, now }: { retention: Retention; now: number }) {
  const view = retention.view.value;
  if (retention.error.value) {
    return <p class="retention notice error">Retention: {retention.error.value}</p>;
  }
  if (!view) return null;
  const last = view.lastPrune;
  return (
    <p class="retention" data-retention>
      Keeps {plural(view.retentionDays, "day")} of requests (rollups{" "}
      {plural(view.rollupRetentionDays, "day")})
      {view.oldestStartedAt !== null && (
        <>
          {" "}· oldest from <Time at={view.oldestStartedAt} now={now} />
        </>
      )} · about {view.requestsApprox.toLocaleString("en-US")} requests · {formatBytes(view.bytes)}
      {" "}
      on disk
      {view.freeBytes > 0 && <>({formatBytes(view.freeBytes)} free)</>}
      {last && (
        <>
          {" "}· last pruned <Time at={last.at} now={now} />: {plural(last.requests, "request")}
          {" "}
          removed
          {last.heldFrom !== null && (
            <>
              , kept from <Time at={last.heldFrom} now={now} /> for an export destination
            </>
          )}
        </>
      )}
      {view.autoVacuum !== "incremental" && (
        <small>
          {" "}
          freed space is reused but the file does not shrink (docs/scaling.md "Retention")
        </small>
      )}
      {view.lastError && <small class="error">· last prune failed: {view.lastError}</small>}
    </p>
  );
}

const NO_CHOICES: HistoryChoices = { routes: [], upstreams: [], outcomes: [] };

/** What each outcome filter means to an operator. */
const OUTCOME_LABELS: Record<HistoryOutcome, string> = {
  success: "success",
  error: "error",
  aborted: "aborted",
  client_disconnected: "client disconnected",
  idle_timeout: "idle timeout before content",
  idle_timeout_mid_stream: "idle timeout mid-stream",
  failed_over: "failed over",
  hedged: "hedged",
  resumed: "resumed",
};

function FilterForm(
  { choices, onSearch }: {
    choices: HistoryChoices;
    onSearch: (filters: HistoryFilters) => void;
  },
) {
  const fields = useSignal({
    route: "",
    upstream: "",
    outcome: "",
    session: "",
    since: "",
    until: "",
  });
  const set = (name: keyof typeof fields.value) =>
  (
    e: { currentTarget: { value: string } },
  ) => (fields.value = { ...fields.value, [name]: e.currentTarget.value });
  const f = fields.value;
  return (
    <form
      class="filters"
      onSubmit={(e) => {
        e.preventDefault();
        onSearch({
          route: f.route.trim() || undefined,
          upstream: f.upstream.trim() || undefined,
          outcome: choices.outcomes.find((o) => o === f.outcome),
          session: f.session.trim() || undefined,
          since: parseLocalDateTime(f.since),
          until: parseLocalDateTime(f.until),
        });
      }}
    >
      <Pick label="Route" name="route" value={f.route} onChange={set("route")}>
        {choices.routes.map((r) => <option key={r} value={r}>{r}</option>)}
      </Pick>
      <Pick label="Upstream" name="upstream" value={f.upstream} onChange={set("upstream")}>
        {choices.upstreams.map((u) => <option key={u} value={u}>{u}</option>)}
      </Pick>
      <Pick label="Outcome" name="outcome" value={f.outcome} onChange={set("outcome")}>
        {choices.outcomes.map((o) => <option key={o} value={o}>{OUTCOME_LABELS[o]}</option>)}
      </Pick>
      <label>
        Session<input name="session" value={f.session} onInput={set("session")} />
      </label>
      <label>
        From<input
          type="datetime-local"
          step="1"
          name="since"
          value={f.since}
          onInput={set("since")}
        />
      </label>
      <label>
        To<input
          type="datetime-local"
          step="1"
          name="until"
          value={f.until}
          onInput={set("until")}
        />
      </label>
      <button type="submit">Search</button>
    </form>
  );
}

function chain(row: HistoryRow): string {
  if (row.hops.length === 0) return "no upstream called";
  return row.hops.map((h) => `${h.upstream} ${h.outcome ?? "running"}`).join(" → ");
}

function result(row: { state: string; status: number | null; errorCode: string | null }): string {
  if (row.state === "open") return "running";
  if (row.state === "interrupted") return "interrupted";
  return `${row.status ?? "—"}${row.errorCode ? ` ${row.errorCode}` : ""}`;
}

function HistoryRowView(props: { row: HistoryRow; now: number; onOpen: () => void }) {
  const { row } = props;
  return (
    <tr class={row.outcome === "error" ? "failed" : ""} data-request-id={row.id}>
      <td data-label="Started">
        <Time at={row.startedAt} now={props.now} />
      </td>
      <td data-label="Request">
        <button
          type="button"
          class="link"
          aria-label={`Show request ${row.id}`}
          onClick={props.onOpen}
        >
          {row.id}
        </button>
        <small>{row.clientFormat}{row.stream ? " · stream" : ""}</small>
      </td>
      <td data-label="Route">{row.route ?? "—"}</td>
      <td data-label="Session">{row.sessionId ?? "—"}</td>
      <td data-label="Attempts" class="chain">{chain(row)}</td>
      <td data-label="Result">{result(row)}</td>
      <td data-label="Duration">{formatMs(row.durationMs)}</td>
      <td data-label="Tokens">{formatTokens(row.inputTokens, row.outputTokens)}</td>
      <td data-label="Cost">{formatUsd(row.costUsd)}</td>
    </tr>
  );
}

function Detail(props: { detail: RequestDetail; now: number; onClose: () => void }) {
  const { request, attempts } = props.detail;
  return (
    <DetailDialog titleId="detail-title" title={`Request ${request.id}`} onClose={props.onClose}>
      <dl>
        <dt>Started</dt>
        <dd>
          <Time at={request.startedAt} now={props.now} />
        </dd>
        <dt>Client format</dt>
        <dd>{request.clientFormat}{request.stream ? " (stream)" : ""}</dd>
        <dt>Route</dt>
        <dd>{request.route ?? "—"}</dd>
        <dt>Session</dt>
        <dd>{request.sessionId ?? "—"}</dd>
        <dt>Key</dt>
        <dd>{request.keyId ?? "—"}</dd>
        <dt>Result</dt>
        <dd>
          {result(request)}
          {request.failureSource && ` (failure source: ${request.failureSource})`}
        </dd>
        {request.errorMessage && (
          <>
            <dt>Error</dt>
            <dd>{request.errorMessage}</dd>
          </>
        )}
        <dt>First content</dt>
        <dd>{formatMs(request.firstContentMs)}</dd>
        <dt>Duration</dt>
        <dd>{formatMs(request.durationMs)}</dd>
        <dt>Tokens</dt>
        <dd>{formatTokens(request.inputTokens, request.outputTokens)}</dd>
        <dt>Cost</dt>
        <dd>{formatUsd(request.costUsd)}</dd>
      </dl>
      <h4>Attempt chain</h4>
      {attempts.length > 0 && (
        <AttemptTimeline timeline={layoutTimeline(props.detail, { now: props.now })} />
      )}
      {attempts.length === 0
        ? <p class="empty">No upstream was called.</p>
        : (
          <table class="cards attempts">
            <TableHead
              columns={[
                "Hop",
                "Upstream",
                "Outcome",
                "Status",
                "Code",
                "Headers",
                "First content",
                "Duration",
                "Tokens",
                "Cost",
              ]}
            />
            <tbody>{attempts.map((a) => <AttemptRow key={a.hop} attempt={a} />)}</tbody>
          </table>
        )}
    </DetailDialog>
  );
}

function AttemptRow({ attempt: a }: { attempt: AttemptRecord }) {
  return (
    <tr class={a.outcome === "success" || a.outcome === "resumed" ? "" : "failed"}>
      <td data-label="Hop">{a.hop}</td>
      <td data-label="Upstream">
        {a.upstream}
        <small>{a.model}</small>
      </td>
      <td data-label="Outcome">
        {a.outcome ?? "running"}
        {a.resumeOffset !== null && <small>continued from character {a.resumeOffset}</small>}
      </td>
      <td data-label="Status">{a.status ?? "—"}</td>
      <td data-label="Code">
        {a.errorCode ?? "—"}
        {a.errorMessage && <small>{a.errorMessage}</small>}
      </td>
      <td data-label="Headers">{formatMs(a.headersMs)}</td>
      <td data-label="First content">{formatMs(a.firstContentMs)}</td>
      <td data-label="Duration">{formatMs(a.durationMs)}</td>
      <td data-label="Tokens">{formatTokens(a.inputTokens, a.outputTokens)}</td>
      <td data-label="Cost">{formatUsd(a.costUsd)}</td>
    </tr>
  );
}
