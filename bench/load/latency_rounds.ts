/**
 * Scenario 1's client: one request at a time, targets alternated in rounds (the order rotates
 * each round) so drift on the machine lands on every target alike. Each target keeps its one
 * keep-alive connection, as a client of a gateway would.
 */
import type { RequestSpec } from "../targets.ts";
import { printResult, readJob } from "./job.ts";

export interface LatencyJob {
  targets: Array<{ id: string; request: RequestSpec }>;
  rounds: number;
  perRound: number;
  warmup: number;
  /** Stop early (rounds cut short) once this much time has gone. */
  budgetMs: number;
}

export interface LatencyJobResult {
  /** Milliseconds per request, by target. */
  samples: Record<string, number[]>;
  errorCount: Record<string, number>;
  /** The first few errors of each target, word for word. */
  errorExamples: Record<string, string[]>;
  rounds: number;
}

async function once(request: RequestSpec): Promise<number | string> {
  const started = performance.now();
  try {
    const res = await fetch(request.url, {
      method: "POST",
      headers: request.headers,
      body: request.body,
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    const took = performance.now() - started;
    if (res.status !== 200) return `HTTP ${res.status}: ${text.slice(0, 200)}`;
    if (!text.includes("pong")) return `unexpected body: ${text.slice(0, 200)}`;
    return took;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

async function run(job: LatencyJob): Promise<LatencyJobResult> {
  const samples: Record<string, number[]> = {};
  const errorCount: Record<string, number> = {};
  const errorExamples: Record<string, string[]> = {};
  for (const t of job.targets) {
    samples[t.id] = [];
    errorCount[t.id] = 0;
    errorExamples[t.id] = [];
    for (let i = 0; i < job.warmup; i++) await once(t.request);
  }
  const deadline = performance.now() + job.budgetMs;
  let rounds = 0;
  for (let r = 0; r < job.rounds && performance.now() < deadline; r++, rounds++) {
    const order = job.targets.map((_, i) => job.targets[(i + r) % job.targets.length]!);
    for (const t of order) {
      for (let i = 0; i < job.perRound; i++) {
        const took = await once(t.request);
        if (typeof took === "number") {
          samples[t.id]!.push(took);
          continue;
        }
        errorCount[t.id]!++;
        if (errorExamples[t.id]!.length < 3) errorExamples[t.id]!.push(took);
      }
    }
  }
  return { samples, errorCount, errorExamples, rounds };
}

if (import.meta.main) printResult(await run(readJob<LatencyJob>()));
