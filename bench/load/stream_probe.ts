/**
 * Scenario 3's client: streams of 64 deltas 20 ms apart, a few at once, targets alternated in
 * rounds. For every delta it records when the fake sent it (the delta's content) and when it
 * arrived here, which gives, per target:
 *
 * - time to first token: request sent to first delta arrived;
 * - delay: arrival minus send, per delta (both wall clocks of this one machine);
 * - added gap: the gap between two deltas as they arrived minus the gap the fake put between
 *   them. A relay that adds nothing has added gaps around zero.
 */
import type { RequestSpec } from "../targets.ts";
import { printResult, readJob, wallMs } from "./job.ts";
import { readSse } from "./sse_reader.ts";

export interface StreamJob {
  targets: Array<{ id: string; request: RequestSpec }>;
  rounds: number;
  concurrency: number;
  expectDeltas: number;
  budgetMs: number;
}

export interface StreamTargetResult {
  streams: number;
  complete: number;
  ttftMs: number[];
  delayMs: number[];
  addedGapMs: number[];
  lostDeltas: number;
  errors: string[];
}

interface OneStream {
  ttftMs: number | null;
  delays: number[];
  gaps: number[];
  deltas: number;
  done: boolean;
  error: string | null;
}

async function oneStream(request: RequestSpec): Promise<OneStream> {
  const out: OneStream = {
    ttftMs: null,
    delays: [],
    gaps: [],
    deltas: 0,
    done: false,
    error: null,
  };
  const started = wallMs();
  let last: { at: number; sentAt: number } | null = null;
  try {
    const res = await fetch(request.url, {
      method: "POST",
      headers: request.headers,
      body: request.body,
      signal: AbortSignal.timeout(30_000),
    });
    if (res.status !== 200 || !res.body) {
      out.error = `HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`;
      return out;
    }
    await readSse(res.body, (item, at) => {
      if (item.kind === "done") out.done = true;
      if (item.kind === "other") out.error ??= `unexpected event: ${item.text}`;
      if (item.kind !== "content") return;
      out.deltas++;
      out.ttftMs ??= at - started;
      out.delays.push(at - item.sentAt);
      if (last) out.gaps.push(at - last.at - (item.sentAt - last.sentAt));
      last = { at, sentAt: item.sentAt };
    });
  } catch (err) {
    out.error = err instanceof Error ? err.message : String(err);
  }
  return out;
}

async function run(job: StreamJob): Promise<Record<string, StreamTargetResult>> {
  const results: Record<string, StreamTargetResult> = {};
  for (const t of job.targets) {
    results[t.id] = {
      streams: 0,
      complete: 0,
      ttftMs: [],
      delayMs: [],
      addedGapMs: [],
      lostDeltas: 0,
      errors: [],
    };
  }
  const deadline = performance.now() + job.budgetMs;
  for (let r = 0; r < job.rounds && performance.now() < deadline; r++) {
    const order = job.targets.map((_, i) => job.targets[(i + r) % job.targets.length]!);
    for (const t of order) {
      const res = results[t.id]!;
      const streams = await Promise.all(
        Array.from({ length: job.concurrency }, () => oneStream(t.request)),
      );
      for (const s of streams) {
        res.streams++;
        if (s.done && s.deltas === job.expectDeltas && !s.error) res.complete++;
        res.lostDeltas += Math.max(0, job.expectDeltas - s.deltas);
        if (s.ttftMs !== null) res.ttftMs.push(s.ttftMs);
        res.delayMs.push(...s.delays);
        res.addedGapMs.push(...s.gaps);
        if (s.error && res.errors.length < 3) res.errors.push(s.error);
      }
    }
  }
  return results;
}

if (import.meta.main) printResult(await run(readJob<StreamJob>()));
