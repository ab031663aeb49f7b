import type { StreamChannel } from "./client_channel.ts";
import { FIRST_READ_BYTES } from "./body_reader.ts";
import { concatBytes } from "../runtime/join_bytes.ts";
import type { ClientStreamEncoder, ClientStreamShape, UpstreamFrame } from "../formats/format.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import type { Hop, HopReader } from "./hop.ts";
import type { FrameDecoder } from "../formats/frame_decoder.ts";
import { ANSWERED, type HopEnding } from "./hop_ending.ts";
import { settleContent } from "./settle.ts";
import { bindContinuations } from "./bind_continuations.ts";
import type { StreamResume } from "./stream_resume.ts";
import { streamPassesThrough } from "../route/passthrough.ts";
import { hidesUsage, isUsageOnlyChunk, withoutUsage } from "./usage_chunk.ts";
import { ReplayGate } from "./replay_gate.ts";

/** docs/design.md "Failover before content": the most a held opening may buffer. */
export const HOLD_LIMIT_BYTES = 1024 * 1024;

export interface PumpOpts {
  /** Whether no other candidate could still answer once this hop's headers went out. */
  isLast: boolean;
  shape: ClientStreamShape;
  channel: StreamChannel;
  encoder: ClientStreamEncoder;
  /** Mid-stream resume's view of the answer (docs/liveness.md); inert when the route has it off. */
  resume: StreamResume;
}

/**
 * One hop's stream, from its upstream body to the client: frames held until
 * the first content (docs/design.md "Failover before content", at most
 * HOLD_LIMIT_BYTES), then passed on as they come, each read's output written
 * at once in one chunk where it can be. It says how the hop ended and
 * decides nothing else: a thrown error (a stop, a broken body) goes to the
 * candidate loop as it is.
 */
export class StreamPump {
  readonly #held: UpstreamFrame[] = [];
  #heldBytes = 0;
  /** The upstream said its answer is complete: a finish reason, or the format's end marker. */
  #finished = false;
  #terminal = false;
  /** What one upstream read makes for the client. */
  readonly #out: Uint8Array[] = [];
  readonly #passthrough: boolean;
  readonly #hideUsage: boolean;
  /** A replaying hop's frames are held and compared until it has caught up (replay_gate.ts). */
  readonly #replay: ReplayGate | null;
  /** Whether the answer's id is wanted: it names a stored interaction (settle.ts). */
  #seekId: boolean;
  /** The state of a body read by reactions (see `run`); null for a body read as a stream. */
  #reading: Reading | null = null;

  constructor(readonly hop: Hop, readonly opts: PumpOpts) {
    this.#passthrough = streamPassesThrough(hop.upstream.kind, opts);
    this.#hideUsage = hidesUsage(hop.req);
    this.#replay = hop.req.replay ? new ReplayGate(hop, opts.resume) : null;
    this.#seekId = hop.req.ir.providerState?.stores === true;
  }

  /**
   * Reads `body` to its end, or to the first frame that ends the hop, and settles `done` with
   * how the hop ended (or what it threw). A body with a frame decoder (every SSE format) is read
   * by reactions on each read (`#read`), not by an async loop, and `done` is the hop's own
   * promise's: a held stream then keeps no suspended frame of the pump's, nor a promise of its
   * own, and a chunk costs no await (docs/performance_log.md "One object per held stream").
   */
  run(body: ReadableStream<Uint8Array>, done: Settle): void {
    const { hop } = this;
    const decoder = hop.adapter.frameDecoder?.();
    if (!decoder) {
      this.#runStream(body).then(done.resolve, done.reject);
      return;
    }
    const reader = hop.reader(body, { reuse: true, firstBytes: FIRST_READ_BYTES });
    this.#reading = new Reading(reader, decoder, done);
    this.#read();
  }

  /** Asks for the next chunk: its answer comes to `#onRead` (or `#onFailed`). */
  #read(): void {
    let read: Promise<ReadableStreamReadResult<Uint8Array>>;
    try {
      read = this.#reading!.reader.read();
    } catch (err) {
      return this.#failed(err);
    }
    read.then(this.#onRead, this.#onFailed);
  }

  /** One read's answer: its frames taken and written, then the next read, or the hop's end. */
  readonly #onRead = (result: ReadableStreamReadResult<Uint8Array>): void => {
    const reading = this.#reading!;
    let ending: HopEnding | null;
    let waiting: Promise<void> | undefined;
    try {
      const chunk = reading.reader.took(result);
      if (!chunk) {
        this.#tail().then(reading.resolve, reading.reject);
        return;
      }
      ending = this.#take(reading.decoder.push(chunk));
      waiting = this.#flush();
    } catch (err) {
      return this.#failed(err);
    }
    // The client is behind: the next read waits for it (a closure only then).
    if (waiting) waiting.then(() => this.#went(ending), this.#onFailed);
    else this.#went(ending);
  };

  readonly #onFailed = (err: unknown): void => this.#failed(err);

  /** After a read's output went out: the hop's end, or the next read. */
  #went(ending: HopEnding | null): void {
    if (!ending) return this.#read();
    const reading = this.#reading!;
    try {
      reading.reader.close();
    } catch (err) {
      return reading.reject(err);
    }
    reading.resolve(ending);
  }

  /** A thrown error (a stop, a broken body) ends the read as it is, the body let go first. */
  #failed(err: unknown): void {
    const reading = this.#reading!;
    try {
      reading.reader.close();
    } catch (closing) {
      return reading.reject(closing);
    }
    reading.reject(err);
  }

  /** The body ended: what the decoder still held, then how the hop ended. */
  async #tail(): Promise<HopEnding> {
    const reading = this.#reading!;
    reading.reader.close();
    const ending = this.#take(reading.decoder.end());
    await this.#flush();
    if (ending) return ending;
    return await this.#bodyEnded();
  }

  /** A body with no frame decoder: its frames read through the adapter's stream. */
  async #runStream(body: ReadableStream<Uint8Array>): Promise<HopEnding> {
    const { hop } = this;
    const reader = hop.reader(body.pipeThrough(hop.adapter.decodeStream()));
    try {
      for (let frame = await reader.next(); frame; frame = await reader.next()) {
        const ending = this.#take([frame]);
        await this.#flush();
        if (ending) return ending;
      }
    } finally {
      reader.close();
    }
    return await this.#bodyEnded();
  }

  /** One read's frames; an ending stops the hop there. */
  #take(frames: UpstreamFrame[]): HopEnding | null {
    const { hop } = this;
    for (const frame of frames) {
      hop.ledger.frame(frame);
      if (this.#seekId) this.#noteId(frame);
      // Bound before the frame's bytes go out: the client may name them at once.
      if (frame.continuations) bindContinuations(hop, frame.continuations);
      if (frame.usage) hop.attempt.usage(frame.usage);
      this.#terminal ||= frame.terminal === true;
      this.#finished ||= this.#terminal || finishes(frame);
      if (frame.error) return { how: "stream_error", error: frame.error };
      if (this.#replay?.holding) {
        const taken = this.#replay.take(frame);
        if (taken && "ending" in taken) return taken.ending;
        if (taken) this.#content(taken.frame);
      } else if (frame.content) this.#content(frame);
      else this.#keepAlive(frame);
    }
    return null;
  }

  /** The answer's id, from its start (an Interactions stream's `interaction.created`). */
  #noteId(frame: UpstreamFrame): void {
    const start = frame.events.find((e) => e.type === "start");
    if (start?.type !== "start" || !start.id) return;
    this.hop.answerId = start.id;
    this.#seekId = false;
  }

  #content(frame: UpstreamFrame): void {
    const { hop } = this;
    const { channel } = this.opts;
    const live = hop.req.live;
    hop.idle.touch();
    if (!hop.attempt.contentSeen) {
      // Hedged: another hop may have claimed the answer already; this one is then being stopped.
      if (!hop.claim()) throw hop.controller.signal.reason;
      settleContent(hop);
      channel.stopKeepAlives();
      channel.sendHeaders();
      this.#release();
      live.contentSent();
    }
    live.frame();
    this.#output(frame);
  }

  /** A keep-alive frame: passed on only where no other candidate could still answer. */
  #keepAlive(frame: UpstreamFrame): void {
    const { hop, opts } = this;
    if (
      hop.attempt.contentSeen || (opts.isLast && opts.channel.headersSent && !hop.gate.contested)
    ) {
      this.#release();
      this.#output(frame);
    } else if (this.#heldBytes + frame.raw.byteLength <= HOLD_LIMIT_BYTES) {
      this.#held.push(frame);
      this.#heldBytes += frame.raw.byteLength;
    }
  }

  #release(): void {
    for (const frame of this.#held) this.#output(frame);
    this.#held.length = 0;
  }

  #output(frame: UpstreamFrame): void {
    const { resume, encoder } = this.opts;
    // Bytes passed on as they came need no events: a quick read's are then never built.
    if (this.#passthrough && !resume.enabled) return this.#passRaw(frame);
    const events = withoutUsage(resume.pass(frame), this.#hideUsage);
    if (resume.resuming && frame.usage) this.hop.req.live.usage(resume.usage);
    if (this.#passthrough) {
      // A passed-through start is shadowed, so a resume can carry on where the client's stream is.
      for (const e of events) encoder.encode(e);
      return this.#passRaw(frame);
    }
    for (const e of events) {
      const bytes = encoder.encode(e);
      if (bytes) this.#out.push(bytes);
    }
  }

  #passRaw(frame: UpstreamFrame): void {
    this.opts.encoder.passed?.(frame);
    if (frame.raw.byteLength && !(this.#hideUsage && isUsageOnlyChunk(frame))) {
      this.#out.push(frame.raw);
    }
  }

  /** Writes what one read made; a promise only when the client is behind (see `offer`). */
  #flush(): Promise<void> | undefined {
    const out = this.#out;
    if (out.length === 0) return;
    const bytes = out.length === 1 ? out[0]! : concat(out);
    out.length = 0;
    return this.opts.channel.offer(bytes) ? this.#drain() : undefined;
  }

  /** A client slow to drain what we have is not upstream silence: the idle clock waits too. */
  async #drain(): Promise<void> {
    const { idle } = this.hop;
    idle.pause();
    try {
      await this.opts.channel.drained();
    } finally {
      idle.resume();
    }
  }

  /** The body ended: an answer only if content came and the upstream said it was complete. */
  async #bodyEnded(): Promise<HopEnding> {
    const { hop } = this;
    const id = hop.upstream.id;
    if (!hop.attempt.contentSeen) {
      const error = new GatewayError(`upstream ${id} closed the stream before any content`, {
        code: "gw.upstream.bad_response",
      });
      return { how: "unfinished", error };
    }
    if (!this.#finished) {
      // Content went out, so nothing can be tried instead: the client is told the answer was cut.
      const error = new GatewayError(
        `upstream ${id} ended its stream before the answer was finished`,
        { code: "gw.upstream.incomplete" },
      );
      return { how: "unfinished", error };
    }
    await this.opts.channel.end({ passthrough: this.#passthrough, marked: this.#terminal });
    return ANSWERED;
  }
}

/** How the hop's promise is settled: the pump's end, or what it threw. */
export interface Settle {
  resolve(ending: HopEnding): void;
  reject(err: unknown): void;
}

/** A body read by reactions: its reader, its decoder, and the hop's promise to settle. */
class Reading {
  readonly resolve: (ending: HopEnding) => void;
  readonly reject: (err: unknown) => void;
  constructor(
    readonly reader: HopReader<Uint8Array>,
    readonly decoder: FrameDecoder,
    done: Settle,
  ) {
    this.resolve = done.resolve;
    this.reject = done.reject;
  }
}

function finishes(frame: UpstreamFrame): boolean {
  return frame.finishes ?? frame.events.some((e) => e.type === "finish");
}

/** One read's output as one chunk; events cut from one chunk and passed on whole are that chunk. */
function concat(parts: Uint8Array[]): Uint8Array {
  const first = parts[0]!;
  let end = first.byteOffset;
  for (const part of parts) {
    if (part.buffer !== first.buffer || part.byteOffset !== end) return concatBytes(parts);
    end += part.byteLength;
  }
  return new Uint8Array(first.buffer, first.byteOffset, end - first.byteOffset);
}
