/**
 * The one-at-a-time client (scenario 1, and the one-caller scenario): one request at a time,
 * targets alternated in rounds (the order rotates each round) so drift on the machine lands on
 * every target alike. Each target keeps its one keep-alive connection, as a client of a gateway
 * would. A streamed target's time is to its last byte (`[DONE]` read), and its first chunk's
 * time is kept apart.
 */
import type { RequestSpec } from "../targets.ts";
import { printResult, readJob } from "./job.ts";

export interface LatencyJob {
  /** `stream`: the answer is SSE, complete once `[DONE]` is read. */
  targets: Array<{ id: string; request: RequestSpec; stream?: boolean }>;
  rounds: number;
  perRound: number;
  warmup: number;
  /** Stop early (rounds cut short) once this much time has gone. */
  budgetMs: number;
}

export interface LatencyJobResult {
  /** Milliseconds per request, by target. */
  samples: Record<string, number[]>;
  /** Streamed targets only: milliseconds to the first chunk of the body. */
  firstChunk: Record<string, number[]>;
  errorCount: Record<string, number>;
  /** The first few errors of each target, word for word. */
  errorExamples: Record<string, string[]>;
  rounds: number;
}

const decoder = new TextDecoder();

/** The body read chunk by chunk, and when its first chunk came (ms after `started`). */
async function readStreamed(
  res: Response,
  started: number,
): Promise<{ text: string; firstMs: number }> {
  let text = "";
  let firstMs = NaN;
  for await (const chunk of res.body ?? new ReadableStream<Uint8Array>()) {
    if (Number.isNaN(firstMs)) firstMs = performance.now() - started;
    text += decoder.decode(chunk, { stream: true });
  }
  return { text, firstMs };
}

async function once(
  target: { request: RequestSpec; stream?: boolean },
): Promise<{ ms: number; firstMs: number } | string> {
  const { request } = target;
  const started = performance.now();
  try {
    const res = await fetch(request.url, {
      method: "POST",
      headers: request.headers,
      body: request.body,
      signal: AbortSignal.timeout(10_000),
    });
    const read = target.stream
      ? await readStreamed(res, started)
      : { text: await res.text(), firstMs: NaN };
    const took = performance.now() - started;
    const text = read.text;
    if (res.status !== 200) return `HTTP ${res.status}: ${text.slice(0, 200)}`;
    const complete = target.stream ? text.endsWith("data: [DONE]\n\n") : text.includes("pong");
    if (!complete) return `unexpected body: ${text.slice(0, 200)}`;
    return { ms: took, firstMs: read.firstMs };
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

async function run(job: LatencyJob): Promise<LatencyJobResult> {
  const samples: Record<string, number[]> = {};
  const firstChunk: Record<string, number[]> = {};
  const errorCount: Record<string, number> = {};
  const errorExamples: Record<string, string[]> = {};
  for (const t of job.targets) {
    samples[t.id] = [];
    if (t.stream) firstChunk[t.id] = [];
    errorCount[t.id] = 0;
    errorExamples[t.id] = [];
    for (let i = 0; i < job.warmup; i++) await once(t);
  }
  const deadline = performance.now() + job.budgetMs;
  let rounds = 0;
  for (let r = 0; r < job.rounds && performance.now() < deadline; r++, rounds++) {
    const order = job.targets.map((_, i) => job.targets[(i + r) % job.targets.length]!);
    for (const t of order) {
      for (let i = 0; i < job.perRound; i++) {
        const took = await once(t);
        if (typeof took !== "string") {
          samples[t.id]!.push(took.ms);
          firstChunk[t.id]?.push(took.firstMs);
          continue;
        }
        errorCount[t.id]!++;
        if (errorExamples[t.id]!.length < 3) errorExamples[t.id]!.push(took);
      }
    }
  }
  return { samples, firstChunk, errorCount, errorExamples, rounds };
}

if (import.meta.main) printResult(await run(readJob<LatencyJob>()));
