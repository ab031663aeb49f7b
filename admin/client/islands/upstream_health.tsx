import { TableHead } from "./table_head.tsx";
import type {
  MemberHealth as Member,
  RecentAttempts,
  UpstreamHealth as Row,
} from "../../api_types.ts";
import { formatMs, formatShare, plural } from "../format.ts";
import { Time } from "./time.tsx";
import type { Health } from "../health_model.ts";
import type { UpstreamAction } from "../api.ts";

export interface UpstreamHealthProps {
  health: Health;
}

/** The fields of a cooldown the state cell shows: an upstream's or a member's. */
type Cooldown = Pick<
  Member,
  "state" | "paused" | "pausedUntil" | "pauseReason" | "consecutiveFailures" | "pauseCount"
>;

/**
 * Slots, state (ok, paused, probing), the last minutes of attempts (error rate, first content,
 * content tokens/s) per configured upstream, and under each the models its routes send it, each
 * with its own state, attempts and pool shares (docs/admin.md "Upstream health").
 */
export function UpstreamHealth({ health }: UpstreamHealthProps) {
  const view = health.view.value;
  const minutes = Math.round((view?.upstreams[0]?.recent.windowMs ?? 0) / 60_000);
  return (
    <section aria-labelledby="health-title">
      <header class="panel-head">
        <h2 id="health-title">Upstream health</h2>
        <button type="button" class="quiet" onClick={() => health.refresh()}>Refresh</button>
      </header>
      {health.error.value && <p class="notice error" role="alert">{health.error.value}</p>}
      {view?.history && (
        <p class="notice error history-problem" role="alert">
          History is not being recorded: {view.history}
        </p>
      )}
      {health.result.value && (
        <p class={`notice ${health.result.value.ok ? "ok" : "error"}`} role="status">
          {health.result.value.text}
          <button
            type="button"
            class="quiet"
            onClick={() =>
              health.dismiss()}
          >
            Dismiss
          </button>
        </p>
      )}
      {view && view.upstreams.length === 0 && <p class="empty">No upstream is configured.</p>}
      {view && view.upstreams.length > 0 && (
        <table class="cards health">
          <TableHead
            columns={[
              "Upstream",
              "In flight",
              "State",
              `Last ${minutes} min`,
              "First content p50 / p95",
              "Content tokens/s",
              "Pool share",
              "Controls",
            ]}
          />
          <tbody>
            {view.upstreams.map((u) => (
              <HealthRow
                key={u.id}
                row={u}
                now={view.at}
                simulated={view.demo}
                onControl={(action) => health.control(u.id, action)}
              />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function HealthRow(
  props: {
    row: Row;
    now: number;
    simulated: boolean;
    onControl: (action: UpstreamAction) => void;
  },
) {
  const u = props.row;
  const used = u.maxInFlight > 0 ? Math.min(1, u.inFlight / u.maxInFlight) : 0;
  return (
    <>
      <tr class={u.paused ? "paused" : ""} data-upstream={u.id}>
        <td data-label="Upstream">
          <strong>{u.id}</strong>
          <small>
            {u.kind}
            {u.enabled ? "" : " · disabled"}
            {props.simulated && <span class="tag simulated">SIMULATED</span>}
          </small>
        </td>
        <td data-label="In flight">
          {u.inFlight} / {u.maxInFlight}
          <meter min={0} max={1} value={used} aria-label={`${u.id} slots in use`} />
        </td>
        <StateCell cooldown={u} now={props.now} />
        <RecentCells recent={u.recent} />
        <td data-label="Pool share" class="pools">—</td>
        {u.kind === "mcp"
          // A tool server's replica (docs/mcp.md): its server is switched in the config.
          ? <td data-label="Controls" class="controls">—</td>
          : <UpstreamControls row={u} onControl={props.onControl} />}
      </tr>
      {u.members.map((m) => <MemberRow key={m.model} upstream={u.id} member={m} now={props.now} />)}
    </>
  );
}

function UpstreamControls(
  props: { row: Row; onControl: (action: UpstreamAction) => void },
) {
  const u = props.row;
  return (
    <td data-label="Controls" class="controls">
      {(u.paused || u.members.some((m) => m.paused)) && (
        <button
          type="button"
          aria-label={`Resume ${u.id}`}
          onClick={() => props.onControl("resume")}
        >
          Resume
        </button>
      )}
      <button
        type="button"
        class="quiet"
        aria-label={`${u.enabled ? "Disable" : "Enable"} ${u.id}`}
        onClick={() => props.onControl(u.enabled ? "disable" : "enable")}
      >
        {u.enabled ? "Disable" : "Enable"}
      </button>
    </td>
  );
}

/**
 * One model the routes send the upstream, under its row: its own cooldown (a model that fails
 * alone is paused alone, docs/design.md "Cooldown"), its attempts and its pool shares.
 */
function MemberRow(props: { upstream: string; member: Member; now: number }) {
  const m = props.member;
  return (
    <tr class={`member${m.paused ? " paused" : ""}`} data-member={`${props.upstream}/${m.model}`}>
      <td data-label="Model">
        <span class="member-of" aria-hidden="true">↳</span> {m.model}
        <small>model of {props.upstream}</small>
      </td>
      <td data-label="In flight">
        <small>the upstream's slots</small>
      </td>
      <StateCell cooldown={m} now={props.now} />
      <RecentCells recent={m.recent} />
      <td data-label="Pool share" class="pools">
        {m.pools.length === 0
          ? "—"
          : m.pools.map((p) => (
            <span key={`${p.route}#${p.index}`} class="pool-share">
              {p.share === null ? "—" : formatShare(p.share)}
              <small>
                of {p.route} pool {p.index + 1} ({p.pick}, weight {p.weight}
                {p.window ? `, last ${p.window}` : ""})
              </small>
            </span>
          ))}
      </td>
      <td data-label="Controls" class="controls"></td>
    </tr>
  );
}

/** A level's cooldown: an upstream's as a whole, or one member's. */
function StateCell(props: { cooldown: Cooldown; now: number }) {
  const c = props.cooldown;
  return (
    <td data-label="State">
      {c.paused && c.pausedUntil !== null
        ? (
          <span class="state paused">
            paused until <Time at={c.pausedUntil} now={props.now} /> (
            {formatMs(c.pausedUntil - props.now)} left)
          </span>
        )
        : c.state === "probing"
        ? (
          <span class="state probing" title="its pause ended: one request at a time tests it">
            probing
          </span>
        )
        : <span class="state ok">ok</span>}
      <small>
        {c.paused
          ? (c.pauseReason ?? "paused")
          : `${plural(c.consecutiveFailures, "failure")} in a row`} · paused{" "}
        {plural(c.pauseCount, "time")}
      </small>
    </td>
  );
}

/** The recent attempts' counts, first content and content rate. */
function RecentCells({ recent: r }: { recent: RecentAttempts }) {
  return (
    <>
      <td data-label="Recent">
        {plural(r.attempts, "attempt")} · {r.failures} failed
        {r.errorRate !== null && ` (${formatShare(r.errorRate)})`}
        <small>
          {plural(r.idleTimeouts, "idle timeout")} · {r.cancelled} aborted or disconnected
        </small>
      </td>
      <td data-label="First content p50 / p95">
        {formatMs(r.firstContentP50Ms)} / {formatMs(r.firstContentP95Ms)}
      </td>
      <td data-label="Content tokens/s">
        {r.tokensPerSecP50 === null ? "—" : Math.round(r.tokensPerSecP50)}
        {r.tokensPerSecP50 !== null && <small>median, after the first content</small>}
      </td>
    </>
  );
}
