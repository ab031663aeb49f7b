import type { LiveRequest } from "../gateway/live/live_request.ts";
import type { LiveRow, LiveSnapshot } from "./api_types.ts";

/**
 * What the live list shows of the requests running now, oldest first: the ones that have run
 * longest are the ones an operator is looking for.
 */
export function liveSnapshot(live: readonly LiveRequest[], opts: { now: number }): LiveSnapshot {
  const requests = live
    .filter((l) => !l.finished)
    .map((l) => liveRow(l, opts.now))
    .sort((a, b) => a.startedAt - b.startedAt || (a.id < b.id ? -1 : 1));
  return { at: opts.now, requests };
}

function liveRow(live: LiveRequest, now: number): LiveRow {
  const r = live.record;
  return {
    id: r.id,
    sessionId: r.sessionId,
    keyId: r.keyId,
    clientFormat: r.clientFormat,
    route: r.route,
    stream: r.stream,
    upstream: r.upstream,
    hop: live.attempts.length,
    state: live.state,
    startedAt: r.startedAt,
    elapsedMs: Math.max(0, now - r.startedAt),
    idleMs: live.lastContentAt === null ? null : Math.max(0, now - live.lastContentAt),
    firstContentMs: r.firstContentMs,
    inputTokens: r.inputTokens,
    outputTokens: r.outputTokens,
    aborting: live.signal.aborted,
  };
}
