import type { SessionView } from "../../sessions_types.ts";
import type { FenceView } from "../../api_types.ts";
import type { Aborts } from "../aborts.ts";
import { fencesOfSession } from "../fences_model.ts";
import { formatTime, plural } from "../format.ts";
import { formatUsd } from "../money.ts";
import { formatHitRate, type Sessions } from "../sessions_model.ts";
import { AbortPrompt } from "./abort_prompt.tsx";
import { FenceList } from "./fence_list.tsx";
import { TableHead } from "./table_head.tsx";

export interface SessionsPanelProps {
  sessions: Sessions;
  aborts: Aborts;
  now: () => number;
}

/**
 * Live and recent sessions (docs/admin.md "Sessions"): per key and session, its routes and
 * upstreams, requests (running ones too), tokens, cache hit rate, cost, the cache writes its
 * moves off a warm upstream cost, its session limits, and Abort session; then the fences aborts
 * left (docs/admin.md "Fences"), each with a Lift. Refresh reads both.
 */
export function SessionsPanel({ sessions, aborts, now }: SessionsPanelProps) {
  const view = sessions.view.value;
  const { fences } = aborts;
  const fenced = fences.view.value?.fences ?? [];
  return (
    <section aria-labelledby="sessions-title">
      <header class="panel-head">
        <h2 id="sessions-title">Sessions</h2>
        <button
          type="button"
          class="quiet"
          onClick={() => void Promise.all([sessions.refresh(), fences.refresh()])}
        >
          Refresh
        </button>
      </header>
      {sessions.error.value && <p class="notice error" role="alert">{sessions.error.value}</p>}
      <AbortPrompt aborts={aborts} panel="sessions" />
      {view && view.sessions.length === 0 && (
        <p class="empty">No session in the last day. A request names one, or has a conversation.</p>
      )}
      {view && view.sessions.length > 0 && (
        <table class="cards sessions">
          <TableHead
            columns={[
              "Session",
              "Key",
              "Routes",
              "Requests",
              "Tokens",
              "Cache hit rate",
              "Cost",
              "Moves",
              "Limits",
              <span key="abort" class="visually-hidden">Abort</span>,
            ]}
          />
          <tbody>
            {view.sessions.map((s) => (
              <SessionRow
                key={`${s.keyId} ${s.sessionId}`}
                s={s}
                aborts={aborts}
                now={now()}
                fenced={fencesOfSession(fenced, s)}
              />
            ))}
          </tbody>
        </table>
      )}
      <FenceList fences={fences} />
    </section>
  );
}

function SessionRow(
  { s, aborts, now, fenced }: {
    s: SessionView;
    aborts: Aborts;
    now: number;
    /** The fences that refuse this session's requests. */
    fenced: FenceView[];
  },
) {
  return (
    <tr data-session-id={s.sessionId}>
      <td data-label="Session">
        <code>{s.sessionId}</code>
        {s.derived && <small class="tag">from the prompt</small>}
        {fenced.some((f) => f.kind === "session") && <small class="tag fence">fenced</small>}
        {fenced.some((f) => f.kind === "turn") && <small class="tag fence">turn fenced</small>}
        <small>last {formatTime(s.lastAt, { now })}</small>
      </td>
      <td data-label="Key">{s.keyId ?? <small>open</small>}</td>
      <td data-label="Routes">
        {s.routes.join(", ") || "—"}
        {s.upstreams.length > 0 && <small>on {s.upstreams.join(", ")}</small>}
      </td>
      <td data-label="Requests">
        {s.requests}
        {s.running > 0 && <small class="running">{s.running} running</small>}
        {s.errors > 0 && <small>{plural(s.errors, "error")}</small>}
      </td>
      <td data-label="Tokens">
        {s.inputTokens} in / {s.outputTokens} out
      </td>
      <td data-label="Cache hit rate" class="hit-rate">
        {formatHitRate(s.cacheHitRate)}
        <small>
          {s.cachedTokens} read, {s.cacheWriteTokens} written
        </small>
      </td>
      <td data-label="Cost">{formatUsd(s.costUsd)}</td>
      <td data-label="Moves">
        {s.moves === 0 ? "—" : (
          <>
            {s.moves} <small>cache writes {formatUsd(s.moveCacheWriteUsd)}</small>
          </>
        )}
      </td>
      <td data-label="Limits">
        <Limits s={s} />
      </td>
      <td>
        {s.running > 0 && (
          <button
            type="button"
            class="danger"
            onClick={() => aborts.ask("session", s.sessionId, { panel: "sessions" })}
          >
            Abort session {s.sessionId}
          </button>
        )}
      </td>
    </tr>
  );
}

function Limits({ s }: { s: SessionView }) {
  const parts: string[] = [];
  const { budget } = s;
  if (budget) {
    const use = budget.use;
    const { limits } = budget;
    if (limits.requests !== undefined) {
      parts.push(`${use?.requests ?? "?"} / ${limits.requests} requests`);
    }
    if (limits.tokens !== undefined) parts.push(`${use?.tokens ?? "?"} / ${limits.tokens} tokens`);
    if (limits.usd !== undefined) {
      parts.push(`${use ? formatUsd(use.costUsd) : "?"} / ${formatUsd(limits.usd)}`);
    }
  }
  if (s.budgetRefusals) parts.push(`budget refused ${s.budgetRefusals}`);
  if (s.loopRefusals) parts.push(`loop refused ${s.loopRefusals}`);
  return parts.length ? <>{parts.join(" · ")}</> : <>—</>;
}
