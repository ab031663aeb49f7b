/**
 * The size of the one buffer a streamed upstream body is read into. The
 * runtime's own reads allocate 64 KiB per read, which a held stream keeps
 * pending for as long as it is quiet and a busy one turns into garbage per
 * event (docs/benchmarks.md); an event is rarely over a few hundred bytes.
 */
export const READ_BUFFER_BYTES = 16 * 1024;

/**
 * Where a streamed body's buffer starts: a held stream (an upstream quiet before its first event)
 * keeps its pending read's buffer for as long as it is held, and thousands may be held at once.
 * 256 bytes hold a Chat Completions delta or a keep-alive in one read. A read that fills the
 * buffer makes it READ_GROWTH times larger, up to READ_BUFFER_BYTES: a burst at the start (a
 * whole short answer at once) then takes as many reads as it did from 1 KiB doubling
 * (docs/performance_log.md "One object per held stream").
 */
export const FIRST_READ_BYTES = 256;

/** How much larger a read buffer grows when a read fills it (see FIRST_READ_BYTES). */
const READ_GROWTH = 8;

/**
 * Buffers of finished reads, by size, for the next body: a new buffer per request was a share
 * of a whole answer's CPU of its own (allocated, zeroed, tracked by the collector).
 */
const SPARE = new Map<number, ArrayBuffer[]>();
const SPARE_PER_SIZE = 32;

function bufferOf(bytes: number): ArrayBuffer {
  return SPARE.get(bytes)?.pop() ?? new ArrayBuffer(bytes);
}

function spare(buffer: ArrayBuffer): void {
  // A buffer a pending read still holds is detached here (byteLength 0): it is the body's.
  if (buffer.byteLength === 0) return;
  let list = SPARE.get(buffer.byteLength);
  if (!list) SPARE.set(buffer.byteLength, list = []);
  if (list.length < SPARE_PER_SIZE) list.push(buffer);
}

/** What a body reader tells the hop it reads for (hop.ts). */
export interface BodyOwner {
  /** The body's connection is let go: after a cancel, or at once for a body read to its end. */
  bodyClosed(): void;
  /** The body was read to its end. */
  bodyEnded(): void;
}

/**
 * An upstream body read until it ends or `signal` stops it (see `Hop.reader`): the stop cancels
 * the read itself, not only the fetch, and a stopped read throws the stop's reason. `next`
 * answers undefined at the end; `close` (always, in a `finally`) lets the body go.
 *
 * With `reuse`, a byte body is read into one small buffer, reused from read to read, so each
 * chunk is valid only until the next read: for a caller that is done with a chunk before it asks
 * for the next (the SSE frame decoders, a whole answer's text decoder). A body that is not a byte
 * stream is read as it comes.
 *
 * One object, one async frame per read, its own abort listener (`handleEvent`): a held stream
 * keeps a pending read suspended for as long as it is quiet, and each layer of it (an async
 * function awaiting another, a closure per listener) was heap per held stream and a promise per
 * chunk (docs/performance_log.md "Held stream and per-read objects").
 */
export class BodyReader<T> {
  readonly #signal: AbortSignal;
  readonly #byob: ReadableStreamBYOBReader | null = null;
  readonly #plain: ReadableStreamDefaultReader<T> | null = null;
  readonly #owner: BodyOwner;
  #buffer: ArrayBuffer | null = null;
  #closed = false;
  /** Read to its end. */
  #done = false;

  constructor(
    body: ReadableStream<T>,
    opts: {
      signal: AbortSignal;
      owner: BodyOwner;
      reuse?: boolean;
      firstBytes?: number;
    },
  ) {
    this.#signal = opts.signal;
    this.#owner = opts.owner;
    if (opts.reuse) {
      try {
        this.#byob = (body as unknown as ReadableStream<Uint8Array>).getReader({ mode: "byob" });
        this.#buffer = bufferOf(opts.firstBytes ?? READ_BUFFER_BYTES);
      } catch {
        // Not a byte stream (a test's fetch): read it with a default reader.
      }
    }
    if (!this.#byob) this.#plain = body.getReader();
    opts.signal.addEventListener("abort", this, { once: true });
  }

  /** The stop: cancels the pending read (an EventListener object, so no closure per body). */
  handleEvent(): void {
    this.#cancel();
  }

  async next(): Promise<T | undefined> {
    return this.took(await this.read());
  }

  /**
   * The next read as the runtime answers it, for `took`: `next` in two halves, so a caller's
   * own async loop awaits the body's read itself, with no async frame of the reader's between
   * (a held stream keeps each one suspended; a busy one pays a promise per chunk for it).
   */
  read(): Promise<ReadableStreamReadResult<T>> {
    const signal = this.#signal;
    if (signal.aborted) throw signal.reason;
    const byob = this.#byob;
    if (!byob) return this.#plain!.read();
    return byob.read(new Uint8Array(this.#buffer!)) as Promise<ReadableStreamReadResult<T>>;
  }

  /** What a `read` came to: its chunk, or undefined at the end; a stop meanwhile throws. */
  took(result: ReadableStreamReadResult<T>): T | undefined {
    const signal = this.#signal;
    if (signal.aborted) throw signal.reason;
    const { done, value } = result;
    if (this.#byob && value) {
      const view = value as unknown as Uint8Array;
      let buffer = view.buffer as ArrayBuffer;
      // The previous chunk is the caller's until its next read, so a grown buffer is a new one.
      if (view.byteLength === buffer.byteLength && buffer.byteLength < READ_BUFFER_BYTES) {
        buffer = bufferOf(Math.min(buffer.byteLength * READ_GROWTH, READ_BUFFER_BYTES));
      }
      this.#buffer = buffer;
    }
    if (done) this.#ended();
    return done ? undefined : value;
  }

  /** The body was read to its end: its connection has nothing left to cancel. */
  #ended(): void {
    if (this.#done) return;
    this.#done = true;
    this.#owner.bodyEnded();
  }

  close(): void {
    this.#signal.removeEventListener("abort", this);
    this.#cancel();
    // The caller holds no chunk any more: the buffer may serve another body.
    if (this.#buffer) spare(this.#buffer);
    this.#buffer = null;
  }

  #cancel(): void {
    if (this.#closed) return;
    this.#closed = true;
    const owner = this.#owner;
    // A body read to its end is closed already: no cancel (and its promises) to wait for.
    if (this.#done) return owner.bodyClosed();
    const reader = this.#byob ?? this.#plain!;
    void reader.cancel(this.#signal.reason).catch(() => {}).finally(() => owner.bodyClosed());
  }
}
