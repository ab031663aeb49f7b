import type { Clock } from "../runtime/clock.ts";
import { realPause } from "../runtime/loop_turn.ts";
import type { ClientCodec, ClientStreamEncoder, ClientStreamShape } from "../formats/format.ts";
import { clientStatus, sameFormatAnswer } from "../formats/error_vocab.ts";
import { ERROR_CODE_HEADER, type GatewayError } from "../runtime/gateway_error.ts";
import { isFinal } from "../runtime/error_codes.ts";

function noop(): void {}

/** How far apart a final error's two forms are sent, and from what went before (Gemini SSE). */
const FINAL_ERROR_APART_MS = 250;

/** Headers every answer carries; the request id is there from the first byte. */
export function baseHeaders(requestId: string, extra: HeadersInit = {}): Headers {
  const headers = new Headers(extra);
  headers.set("x-request-id", requestId);
  return headers;
}

/**
 * The error response in the client's own format, with the status its format gives the error's
 * meaning (an operator's stop: gateway/formats/error_vocab.ts); the gateway's code rides in
 * `x-pulsegate-error-code`. An upstream's own 4xx reaches a client of the
 * same format as it came: status, body and content type (docs/design.md "Client API").
 */
export function errorResponse(
  codec: ClientCodec,
  err: GatewayError,
  opts: { requestId: string },
): Response {
  const answer = sameFormatAnswer(err, codec.format);
  const headers = baseHeaders(opts.requestId, {
    "content-type": answer?.contentType ?? "application/json",
    "x-pulsegate-error": err.source,
    [ERROR_CODE_HEADER]: err.code,
  });
  if (err.retryAfterSecs !== undefined) {
    headers.set("retry-after", String(Math.max(1, Math.ceil(err.retryAfterSecs))));
  }
  if (isFinal(err.code)) headers.set("x-should-retry", "false");
  const body = answer?.text ?? JSON.stringify(codec.renderError(err));
  return new Response(body, { status: clientStatus(err, codec.format), headers });
}

/** Who is told when the client cancels the stream (stream_forward.ts): a method, no closure. */
export interface ChannelOwner {
  clientGone(): void;
}

/**
 * The client's side of one streamed answer. Headers go out once; keep-alive
 * comments flow only while nothing else does; a cancelled body reports to
 * its owner (`clientGone`) so cleanup never depends on the next write.
 *
 * The channel is its body stream's underlying source (`start`, `pull`, `cancel`), and its
 * keep-alive tick is one function made once: a held stream keeps all of it for as long as it
 * is quiet (docs/performance_log.md "One object per held stream").
 */
export class StreamChannel implements UnderlyingDefaultSource<Uint8Array> {
  readonly response: Promise<Response>;
  #resolve!: (r: Response) => void;
  #controller!: ReadableStreamDefaultController<Uint8Array>;
  #readable: ReadableStream<Uint8Array>;
  /** Writers waiting for the client to take what is queued; made for the first. */
  #waiting: Array<() => void> | null = null;
  #cancelled = false;
  #keepAlive: (() => void) | null = null;
  #closed = false;
  headersSent = false;

  constructor(
    private opts: {
      codec: ClientCodec;
      shape: ClientStreamShape;
      encoder: ClientStreamEncoder;
      requestId: string;
      clock: Clock;
      keepAliveMs: number;
      owner: ChannelOwner;
    },
  ) {
    this.response = new Promise((resolve) => (this.#resolve = resolve));
    // One stream stage, not a TransformStream pair: writes enqueue directly and
    // wait (backpressure) only while the client has not taken the last chunk.
    this.#readable = new ReadableStream<Uint8Array>(this, { highWaterMark: 1 });
  }

  /** The body stream's start (as its underlying source): its controller is the channel's. */
  start(controller: ReadableStreamDefaultController<Uint8Array>): void {
    this.#controller = controller;
  }

  /** The client took what was queued (as the body stream's underlying source). */
  pull(): void {
    this.#wakeWriters();
  }

  /** The client cancelled the body (as its underlying source): it has gone. */
  cancel(): void {
    this.#cancelled = true;
    this.#wakeWriters();
    if (!this.#closed) this.opts.owner.clientGone();
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Sends 200 and the streaming headers; idempotent. */
  sendHeaders(): void {
    if (this.headersSent) return;
    this.headersSent = true;
    const resolve = this.#resolve;
    // Resolved once: its resolving functions (and their scope) need not stay for the stream.
    this.#resolve = noop;
    resolve(
      new Response(this.#readable, {
        status: 200,
        headers: baseHeaders(this.opts.requestId, {
          "content-type": this.opts.shape.contentType,
          "cache-control": "no-cache",
        }),
      }),
    );
    const open = this.opts.encoder.open();
    if (open) void this.write(open);
  }

  /**
   * Starts `: keep-alive` comments (where the client takes them) until content
   * flows. The first goes out with the headers, so proxies see a byte at once.
   */
  startKeepAlives(): void {
    const block = this.opts.shape.keepAlive;
    if (!block || this.#keepAlive) return;
    void this.write(block);
    this.#keepAlive = this.opts.clock.after(this.opts.keepAliveMs, this.#tick);
  }

  /** One keep-alive, and the next armed: made once, not a closure per tick. */
  readonly #tick = (): void => {
    const block = this.opts.shape.keepAlive;
    if (!block) return;
    void this.write(block);
    this.#keepAlive = this.opts.clock.after(this.opts.keepAliveMs, this.#tick);
  };

  stopKeepAlives(): void {
    this.#keepAlive?.();
    this.#keepAlive = null;
  }

  /** Resolves false when the client has gone. */
  async write(bytes: Uint8Array): Promise<boolean> {
    if (this.offer(bytes)) await this.drained();
    return !this.#cancelled;
  }

  /**
   * Queues bytes for the client without waiting; answers whether the writer
   * should wait (`drained`) before the next. The stream path's per-event
   * write: a client keeping up costs it no promise.
   */
  offer(bytes: Uint8Array): boolean {
    if (this.#closed || this.#cancelled) return false;
    this.#controller.enqueue(bytes);
    return this.#full();
  }

  /** Resolves once the client has taken what is queued, or has gone. */
  async drained(): Promise<void> {
    while (this.#full()) await new Promise<void>((wake) => (this.#waiting ??= []).push(wake));
  }

  #full(): boolean {
    if (this.#closed || this.#cancelled) return false;
    const room = this.#controller.desiredSize;
    return room !== null && room <= 0;
  }

  #wakeWriters(): void {
    const waiting = this.#waiting;
    if (!waiting) return;
    this.#waiting = null;
    for (const wake of waiting) wake();
  }

  /** Closes a finished stream; a passed-through stream carried its own ending, if it was `marked`. */
  async end(opts: { passthrough: boolean; marked: boolean }): Promise<void> {
    this.stopKeepAlives();
    const tail = !opts.passthrough
      ? this.opts.encoder.close()
      : opts.marked
      ? null
      : this.opts.shape.endMarker;
    if (tail) await this.write(tail);
    await this.#close();
  }

  /** Ends with an error: a status in the client's format before headers, an event after. */
  async fail(err: GatewayError): Promise<void> {
    this.stopKeepAlives();
    if (!this.headersSent) {
      this.headersSent = true;
      this.#closed = true;
      const resolve = this.#resolve;
      this.#resolve = noop;
      resolve(errorResponse(this.opts.codec, err, { requestId: this.opts.requestId }));
      this.#wakeWriters();
      return;
    }
    const again = this.opts.encoder.errorAgain?.(err);
    // Google's SDK raises the first only from a network chunk of its own: a loop turn lets the
    // server send it before the second is queued, or both would leave in one write. A final
    // error must not share a read with anything: Gemini CLI's SDK then sees a stream without a
    // finish reason, which Gemini CLI re-sends (docs/design.md "Abort and disconnect"), so it
    // waits out a client's read on either side, in real time. The loop turn is taken on the
    // request's clock: a real turn when served, and no time at all when a test drives a virtual
    // clock (a real wait there lets virtual time run on past the instants under test).
    const apart = again && isFinal(err.code)
      ? () => this.#readTime()
      : () => this.opts.clock.sleep(0);
    if (again) await apart();
    await this.write(this.opts.encoder.error(err));
    if (again) {
      await apart();
      await this.write(again);
    }
    await this.#close();
  }

  /**
   * Long enough for a busy client to have read what went before: real time, since a real
   * client reads at its own pace whatever the clock's.
   */
  #readTime(): Promise<void> {
    return realPause(FINAL_ERROR_APART_MS);
  }

  #close(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
    this.#wakeWriters();
    if (!this.#cancelled) this.#controller.close();
    return Promise.resolve();
  }
}
