/**
 * A request body's deadline (gateway/accept/body_bytes.ts, docs/security.md "Request bodies and
 * per-key concurrency") at its real values on the virtual clock: 10 s for every body, then 1 s
 * more per 16 KiB received, never past 300 s, each cut at the exact millisecond as 408
 * `gw.client.body_timeout`.
 */
import assert from "node:assert/strict";
import { VirtualClock } from "../../tests/virtual_clock.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import { BODY_GRACE_MS, BODY_MAX_MS, BODY_MIN_BYTES_PER_SEC, readBodyBytes } from "./body_bytes.ts";

const KIB = 1024;
const LIMIT = 64 * 1024 * 1024;

/**
 * A body the test sends: `chunks` are [ms since the start, bytes] enqueued at that virtual
 * instant; `end` closes it then (never, when absent).
 */
function slowRequest(
  clock: VirtualClock,
  opts: { chunks: [number, number][]; end?: number; declared?: number },
): Request {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const [at, size] of opts.chunks) {
        clock.after(at, () => controller.enqueue(new Uint8Array(size)));
      }
      if (opts.end !== undefined) clock.after(opts.end, () => controller.close());
    },
  });
  const headers: Record<string, string> = opts.declared === undefined
    ? {}
    : { "content-length": String(opts.declared) };
  return new Request("http://gateway.test/v1/chat/completions", {
    method: "POST",
    body,
    headers,
  });
}

/** Reads the body to its end in virtual time: when it ended (ms since the start) and how. */
async function read(
  clock: VirtualClock,
  request: Request,
): Promise<{ at: number; bytes?: number; error?: GatewayError }> {
  const signal = new AbortController().signal;
  const reading = readBodyBytes(request, { limit: LIMIT, signal, clock }).then(
    (bytes) => ({ at: clock.sinceStart, bytes: bytes.byteLength }),
    (error: GatewayError) => ({ at: clock.sinceStart, error }),
  );
  return await clock.run(reading, { limitMs: 3_600_000 });
}

Deno.test("body deadline: the real values are 10 s, 16 KiB a second, 300 s at most", () => {
  assert.equal(BODY_GRACE_MS, 10_000);
  assert.equal(BODY_MIN_BYTES_PER_SEC, 16 * KIB);
  assert.equal(BODY_MAX_MS, 300_000);
});

Deno.test("body deadline: a body that sends nothing is cut at exactly 10 s with 408", async () => {
  const clock = new VirtualClock();
  const got = await read(clock, slowRequest(clock, { chunks: [] }));
  assert.equal(got.at, 10_000);
  assert.equal(got.error?.code, "gw.client.body_timeout");
  assert.equal(got.error?.status, 408);
  assert.match(got.error!.message, /0 bytes in 10\.0 s/);
});

Deno.test("body deadline: one that ends 1 ms before its 10 s is read whole", async () => {
  const clock = new VirtualClock();
  const got = await read(clock, slowRequest(clock, { chunks: [[9_000, 100]], end: 9_999 }));
  assert.deepEqual(got, { at: 9_999, bytes: 100 });
});

Deno.test("body deadline: 32 KiB received move it to 12 s, and not a millisecond further", async () => {
  const clock = new VirtualClock();
  const got = await read(clock, slowRequest(clock, { chunks: [[0, 16 * KIB], [5_000, 16 * KIB]] }));
  assert.equal(got.at, 12_000);
  assert.equal(got.error?.code, "gw.client.body_timeout");
  assert.match(got.error!.message, /32768 bytes in 12\.0 s/);
  const whole = new VirtualClock();
  const ended = await read(
    whole,
    slowRequest(whole, { chunks: [[0, 16 * KIB], [5_000, 16 * KIB]], end: 11_999 }),
  );
  assert.deepEqual(ended, { at: 11_999, bytes: 32 * KIB });
});

Deno.test("body deadline: a body that keeps up 16 KiB a second runs until the 300 s cap, and is cut there", async () => {
  const clock = new VirtualClock();
  const chunks: [number, number][] = [];
  for (let at = 0; at < 400_000; at += 1_000) chunks.push([at, 16 * KIB]);
  const got = await read(clock, slowRequest(clock, { chunks }));
  assert.equal(got.at, 300_000);
  assert.equal(got.error?.code, "gw.client.body_timeout");
  // A steady body that ends before the cap is read whole.
  const steady = new VirtualClock();
  const ended = await read(steady, slowRequest(steady, { chunks, end: 299_999 }));
  assert.deepEqual(ended, { at: 299_999, bytes: 300 * 16 * KIB });
});

Deno.test("body deadline: a small declared body counts as received from the start: 48 KiB are due at 13 s", async () => {
  const clock = new VirtualClock();
  const got = await read(
    clock,
    slowRequest(clock, { chunks: [[1_000, 16 * KIB]], declared: 48 * KIB }),
  );
  assert.equal(got.at, 13_000);
  assert.equal(got.error?.code, "gw.client.body_timeout");
});
