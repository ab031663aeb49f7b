import { type Clock, REAL_TIME } from "../runtime/clock.ts";
import { clientError, GatewayError } from "../runtime/gateway_error.ts";
import { clientDisconnected } from "../forward/stop_reasons.ts";

/**
 * How long a request body may take (docs/security.md "Request bodies and per-key
 * concurrency"): every body gets
 * `BODY_GRACE_MS`, and after it must keep an average of `BODY_MIN_BYTES_PER_SEC`, so a body
 * is due `BODY_GRACE_MS` plus one second per 16 KiB received after it began, and never later
 * than `BODY_MAX_MS`. Clock milliseconds, as configured.
 */
export const BODY_GRACE_MS = 10_000;
export const BODY_MIN_BYTES_PER_SEC = 16 * 1024;
export const BODY_MAX_MS = 300_000;

/**
 * A body declaring at most this is read in one call: the runtime reserves its declared length,
 * no more than the buffer its stream reader takes for a first chunk anyway, and one call costs a
 * fraction of a chunk-by-chunk read (docs/security.md "Request bodies and per-key concurrency").
 */
export const WHOLE_READ_MAX_BYTES = 64 * 1024;
/** A reader's chunk can sit in a 64 KiB buffer: bytes are copied out, never kept as chunks. */
const FIRST_CAPACITY = 16 * 1024;

/**
 * A request body's bytes, never reserved by a declared length beyond `WHOLE_READ_MAX_BYTES`:
 * a larger or chunked body is read as counted chunks, so memory follows the bytes that arrived.
 * A declared length over `limit` is refused before reading; a body that grows past it is cut
 * at once; one that comes too slowly is cut at its deadline (408 `gw.client.body_timeout`); a
 * caller who leaves while sending, or a request stopped by `signal`, is told apart from a bad
 * body.
 */
export async function readBodyBytes(
  request: Request,
  opts: { limit: number; signal: AbortSignal; clock?: Clock },
): Promise<Uint8Array> {
  const { limit, signal } = opts;
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > limit) throw tooLarge(limit);
  if (signal.aborted) throw signal.reason;
  const clock = opts.clock ?? REAL_TIME;
  let bytes: Uint8Array;
  // Not `request.body` first: making its stream costs more than the whole read of a small body.
  if (declared > 0 && declared <= WHOLE_READ_MAX_BYTES) {
    bytes = await wholeBody(request, { declared, signal, clock });
  } else if (!request.body) {
    bytes = new Uint8Array(0);
  } else {
    bytes = await countedBody(request, { limit, declared, signal, clock });
  }
  readToEnd.add(request);
  return bytes;
}

/** Requests whose body `readBodyBytes` read to its end. */
const readToEnd = new WeakSet<Request>();

/**
 * Whether `readBodyBytes` read this request's body to its end. An answer given otherwise leaves
 * body bytes due on the connection, which is then closed after it (gateway/start/unread_body.ts,
 * docs/deploy.md "Answers before the body").
 */
export function bodyReadToEnd(request: Request): boolean {
  return readToEnd.has(request);
}

/** A small declared body in one call, raced against its deadline and the request's signal. */
async function wholeBody(
  request: Request,
  opts: { declared: number; signal: AbortSignal; clock: Clock },
): Promise<Uint8Array> {
  const { signal } = opts;
  const read = request.arrayBuffer();
  let stop!: (why: GatewayError) => void;
  const stopped = new Promise<never>((_, reject) => (stop = reject));
  // Its length is known and small: its deadline counts it as received from the start.
  const watch = new BodyWatch({ signal, clock: opts.clock, received: () => opts.declared, stop });
  try {
    return new Uint8Array(await Promise.race([read, stopped]));
  } catch (err) {
    // A read left behind ends with the connection; its failure is no one's to hear.
    read.catch(() => {});
    if (err instanceof GatewayError) throw err;
    throw signal.aborted ? signal.reason : clientDisconnected();
  } finally {
    watch.dispose();
  }
}

/** Any other body, chunk by chunk, each copied into one buffer that doubles as needed. */
async function countedBody(
  request: Request,
  opts: { limit: number; declared: number; signal: AbortSignal; clock: Clock },
): Promise<Uint8Array> {
  const { limit, signal } = opts;
  const reader = request.body!.getReader();
  const bytes = new Collected(
    opts.declared > 0 ? Math.min(opts.declared, WHOLE_READ_MAX_BYTES) : FIRST_CAPACITY,
  );
  let stopped: GatewayError | null = null;
  const stop = (why: GatewayError) => {
    stopped ??= why;
    reader.cancel(why).catch(() => {});
  };
  const watch = new BodyWatch({ signal, clock: opts.clock, received: () => bytes.size, stop });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (stopped) throw stopped;
      if (done) break;
      if (bytes.size + value.byteLength > limit) throw tooLarge(limit);
      bytes.add(value);
    }
  } catch (err) {
    if (stopped) throw stopped;
    if (err instanceof GatewayError) {
      reader.cancel(err).catch(() => {});
      throw err;
    }
    throw signal.aborted ? signal.reason : clientDisconnected();
  } finally {
    watch.dispose();
  }
  return bytes.view();
}

/** Chunks copied into one buffer that doubles as needed: at most twice the bytes received. */
class Collected {
  size = 0;
  #buffer: Uint8Array;

  constructor(capacity: number) {
    this.#buffer = new Uint8Array(capacity);
  }

  add(chunk: Uint8Array): void {
    const needed = this.size + chunk.byteLength;
    if (needed > this.#buffer.byteLength) {
      const grown = new Uint8Array(Math.max(needed, this.#buffer.byteLength * 2));
      grown.set(this.#buffer.subarray(0, this.size));
      this.#buffer = grown;
    }
    this.#buffer.set(chunk, this.size);
    this.size = needed;
  }

  view(): Uint8Array {
    return this.#buffer.subarray(0, this.size);
  }
}

/** A timer's cancel before any is set. */
const NOTHING = () => {};

/**
 * Calls `stop` when the request is stopped or the body's deadline passes, until `dispose`. One
 * object per body, its own abort listener (`handleEvent`), where a closure per role cost five.
 * One timer for the deadline, which moves as bytes arrive: when it fires it looks again at what
 * arrived, and only a body still behind is cut. So a timer is set once per deadline passed, not
 * once per chunk.
 */
class BodyWatch {
  readonly #started: number;
  #cancel: () => void = NOTHING;

  constructor(
    private on: {
      signal: AbortSignal;
      clock: Clock;
      received: () => number;
      stop: (why: GatewayError) => void;
    },
  ) {
    on.signal.addEventListener("abort", this);
    this.#started = on.clock.now();
    this.#arm();
  }

  /** The request was stopped. */
  handleEvent(): void {
    this.on.stop(GatewayError.from(this.on.signal.reason));
  }

  dispose(): void {
    this.#cancel();
    this.on.signal.removeEventListener("abort", this);
  }

  #arm(): void {
    const { clock, received } = this.on;
    const elapsed = clock.elapsed(this.#started);
    const due = Math.min(BODY_MAX_MS, BODY_GRACE_MS + (received() / BODY_MIN_BYTES_PER_SEC) * 1000);
    if (elapsed >= due) return this.on.stop(bodyTimeout(received(), elapsed));
    this.#cancel = clock.after(due - elapsed, () => this.#arm());
  }
}

function bodyTimeout(received: number, elapsedMs: number): GatewayError {
  return clientError(
    `request body too slow: ${received} bytes in ${(elapsedMs / 1000).toFixed(1)} s; a body ` +
      `must arrive within ${BODY_GRACE_MS / 1000} s plus 1 s per ` +
      `${BODY_MIN_BYTES_PER_SEC / 1024} KiB, and within ${BODY_MAX_MS / 1000} s in all`,
    { code: "gw.client.body_timeout" },
  );
}

export function tooLarge(limit: number): GatewayError {
  return clientError(`request body is larger than the limit of ${limit} bytes`, {
    code: "gw.client.body_too_large",
  });
}
