/**
 * A request's attempt chain laid out on one time axis (docs/admin.md "History"): each hop a bar
 * from the moment it was sent to its end, with its headers and first content marked. Times are
 * milliseconds since the request started, so a wait for a slot shows as a gap before the first
 * bar. Pure: the view draws what this returns.
 */
import type { AttemptRecord, RequestDetail } from "../api_types.ts";

export interface TimelineBar {
  hop: number;
  upstream: string;
  model: string;
  /** Null while the hop runs. */
  outcome: string | null;
  errorCode: string | null;
  startMs: number;
  endMs: number;
  running: boolean;
  /** Since the request started; null when it never came. */
  headersMs: number | null;
  firstContentMs: number | null;
  /** Ran at the same time as another hop: a hedge and the hop it raced. */
  hedged: boolean;
  /** The hop whose answer this one continued (outcome `resumed`). */
  resumes: number | null;
}

export interface Timeline {
  spanMs: number;
  bars: TimelineBar[];
  /** Where the axis is labelled, in ms since the start. */
  ticks: number[];
}

export function layoutTimeline(detail: RequestDetail, opts: { now: number }): Timeline {
  const t0 = detail.request.startedAt;
  const bars = detail.attempts.map((a) => bar(a, { t0, now: opts.now }));
  for (const b of bars) {
    b.hedged = b.outcome === "hedge_lost" ||
      bars.some((o) => o !== b && o.startMs < b.endMs && b.startMs < o.endMs);
    if (b.outcome === "resumed") b.resumes = bars.find((o) => o.hop === b.hop - 1)?.hop ?? null;
  }
  const requestEnd = detail.request.durationMs ?? 0;
  const spanMs = Math.max(1, requestEnd, ...bars.map((b) => b.endMs));
  return { spanMs, bars, ticks: axisTicks(spanMs) };
}

function bar(a: AttemptRecord, opts: { t0: number; now: number }): TimelineBar {
  const startMs = Math.max(0, a.startedAt - opts.t0);
  const running = a.durationMs === null;
  const lasted = a.durationMs ?? Math.max(0, opts.now - a.startedAt);
  const since = (ms: number | null) => ms === null ? null : startMs + ms;
  return {
    hop: a.hop,
    upstream: a.upstream,
    model: a.model,
    outcome: a.outcome,
    errorCode: a.errorCode,
    startMs,
    endMs: startMs + lasted,
    running,
    headersMs: since(a.headersMs),
    firstContentMs: since(a.firstContentMs),
    hedged: false,
    resumes: null,
  };
}

/** Round steps (1, 2 or 5 times a power of ten), at most five of them across the span. */
export function axisTicks(spanMs: number): number[] {
  const rough = spanMs / 5;
  const power = 10 ** Math.floor(Math.log10(Math.max(rough, 1e-9)));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough) ?? 10 * power;
  const ticks: number[] = [];
  for (let t = 0; t <= spanMs + 1e-9; t += step) ticks.push(Math.round(t * 1000) / 1000);
  return ticks;
}

/** One sentence per hop, for the chart's text alternative. */
export function describeBar(b: TimelineBar): string {
  const parts = [`hop ${b.hop} ${b.upstream}: sent at ${Math.round(b.startMs)} ms`];
  if (b.headersMs !== null) parts.push(`headers at ${Math.round(b.headersMs)} ms`);
  if (b.firstContentMs !== null) parts.push(`first content at ${Math.round(b.firstContentMs)} ms`);
  parts.push(
    b.running
      ? `still running at ${Math.round(b.endMs)} ms`
      : `${b.outcome ?? "ended"} at ${Math.round(b.endMs)} ms`,
  );
  if (b.resumes !== null) parts.push(`continues the answer of hop ${b.resumes}`);
  else if (b.hedged) parts.push("ran beside another hop (hedged)");
  return parts.join(", ");
}
