/**
 * Load job of the live view scenario (bench/scenarios/live_view.ts): holds `count` streams open
 * through the gateways, spread over them in turn, each with its own request id
 * (`<prefix>-<i>`), reading and dropping what comes, until the file `stopFile` exists. Prints
 * how many it opened and how many failed.
 */
import { printResult, readJob } from "./job.ts";

export interface LiveStreamsJob {
  urls: string[];
  count: number;
  openPerSecond: number;
  body: string;
  prefix: string;
  stopFile: string;
  /** Gives up holding after this long, whatever happens. */
  maxHoldMs: number;
}

export interface LiveStreamsResult {
  opened: number;
  errors: number;
  errorExamples: string[];
}

const job = readJob<LiveStreamsJob>();
const stop = new AbortController();
/** The open streams' readers, cancelled at the stop. */
const readers = new Set<ReadableStreamDefaultReader<Uint8Array>>();
let opened = 0;
let errors = 0;
const examples: string[] = [];

async function hold(url: string, id: string): Promise<void> {
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": id },
      body: job.body,
      signal: stop.signal,
    });
    if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
    opened++;
    const reader = res.body!.getReader();
    readers.add(reader);
    while (!(await reader.read()).done) { /* dropped */ }
  } catch (err) {
    if (stop.signal.aborted) return;
    errors++;
    if (examples.length < 5) {
      examples.push(String(err).slice(0, 200));
      console.error(`${id}: ${String(err).slice(0, 200)}`);
    }
  }
}

const held: Promise<void>[] = [];
const gapMs = 1000 / job.openPerSecond;
const started = performance.now();
for (let i = 0; i < job.count; i++) {
  const url = job.urls[i % job.urls.length]!;
  held.push(hold(url, `${job.prefix}-${i}`));
  const due = started + (i + 1) * gapMs;
  const wait = due - performance.now();
  if (wait > 1) await new Promise((r) => setTimeout(r, wait));
}
const holdUntil = performance.now() + job.maxHoldMs;
while (performance.now() < holdUntil) {
  if (await Deno.stat(job.stopFile).then(() => true, () => false)) break;
  await new Promise((r) => setTimeout(r, 200));
}
// Held streams are cancelled one by one (aborting the fetches' signal alone left thousands of
// bodies open), and the job ends within 10 s whatever is still settling.
stop.abort();
for (const reader of readers) reader.cancel().catch(() => {});
await Promise.race([Promise.all(held), new Promise((r) => setTimeout(r, 10_000))]);
printResult({ opened, errors, errorExamples: examples } satisfies LiveStreamsResult);
Deno.exit(0);
