import { StreamChannel } from "./client_channel.ts";
import { FIRST_READ_BYTES } from "./body_reader.ts";
import { concatBytes } from "../runtime/join_bytes.ts";
import type { ClientStreamEncoder, ClientStreamShape, UpstreamFrame } from "../formats/format.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import { runCandidates, type RunHop } from "./failover.ts";
import { ResumePass } from "./resume_pass.ts";
import { StreamResume } from "./stream_resume.ts";
import type { ForwardDeps, ForwardRequest, Hop, HopResult } from "./hop.ts";
import { clientDisconnected, stopReason } from "./stop_reasons.ts";
import { hidesUsage, isUsageOnlyChunk, withoutUsage } from "./usage_chunk.ts";

/** docs/design.md "Failover before content": how long a streamed answer may be held before headers go out. */
export const OPENING_HOLD_MS = 15_000;
export const KEEP_ALIVE_MS = 15_000;
/** docs/design.md "Failover before content": the most a held opening may buffer. */
export const HOLD_LIMIT_BYTES = 1024 * 1024;

/**
 * Serves a streamed answer. Resolves with the response as soon as its
 * headers are decided; the stream itself runs on, and `done` settles when
 * the request has ended and its row is written.
 */
export function forwardStream(
  req: ForwardRequest,
  deps: ForwardDeps,
): { response: Promise<Response>; done: Promise<void> } {
  const { live, codec, ctx } = req;
  const shape = codec.streamShape(ctx);
  const encoder = codec.streamEncoder({ ...ctx, id: live.record.id, model: req.ir.model });
  const channel = new StreamChannel({
    codec,
    shape,
    encoder,
    requestId: live.record.id,
    clock: deps.clock,
    keepAliveMs: KEEP_ALIVE_MS,
    onCancel: () => live.controller.abort(clientDisconnected()),
  });
  // Gemini JSON arrays are never answered early: the array can't carry a comment.
  const holdsOpen = shape.keepAlive !== null || ctx.sse === true;
  const cancelHold = holdsOpen
    ? deps.clock.after(OPENING_HOLD_MS, () => {
      if (channel.headersSent) return;
      channel.sendHeaders();
      channel.startKeepAlives();
    })
    : () => {};
  const resume = StreamResume.for(req, { client: codec.format });
  const pass = new ResumePass(req, { deps, resume, channel });
  const done = (async () => {
    let error: GatewayError | null = null;
    try {
      const runHop: RunHop = (hop, opts) =>
        streamHop(hop, { ...opts, shape, channel, encoder, deps, resume });
      error = await runCandidates(req, {
        deps,
        runHop: pass.enabled ? pass.watch(runHop) : runHop,
      });
      if (pass.enabled) error = await pass.after(error, runHop);
    } catch (err) {
      // A bug must still end the client's stream and the row, never an unhandled rejection.
      error = GatewayError.from(err);
      deps.log.event("gateway.internal_error", { error: String(err) });
    } finally {
      cancelHold();
      if (error) await channel.fail(error);
      live.finish({ status: error?.status ?? 200, error: error ?? undefined });
    }
  })();
  return { response: channel.response, done };
}

interface StreamHopOpts {
  isLast: boolean;
  shape: ClientStreamShape;
  channel: StreamChannel;
  encoder: ClientStreamEncoder;
  deps: ForwardDeps;
  /** Mid-stream resume's view of the answer (docs/liveness.md); inert when the route has it off. */
  resume: StreamResume;
}

async function streamHop(hop: Hop, opts: StreamHopOpts): Promise<HopResult> {
  const { channel, encoder, resume } = opts;
  const live = hop.req.live;
  // The request body and the answer's bytes pass through separately (see passesBodyThrough).
  const passthrough = resume.passesThrough(opts.shape.passthroughFrom === hop.upstream.kind);
  const hideUsage = hidesUsage(hop.req);
  const res = await hop.send();
  if (!res.ok || !res.body) return await hop.failedStatus(res);
  live.state = "holding";
  const held: UpstreamFrame[] = [];
  let heldBytes = 0;
  // Whether the upstream said its answer is complete: a finish reason, or the format's end marker.
  let finished = false;
  let terminal = false;
  /** What one upstream read makes for the client: written at once, in one chunk where it can. */
  const out: Uint8Array[] = [];
  const passRaw = (frame: UpstreamFrame) => {
    if (frame.raw.byteLength && !(hideUsage && isUsageOnlyChunk(frame))) out.push(frame.raw);
  };
  const output = (frame: UpstreamFrame): void => {
    // Bytes passed on as they came need no events: a quick read's are then never built.
    if (passthrough && !resume.enabled) return passRaw(frame);
    const events = withoutUsage(resume.pass(frame), hideUsage);
    if (resume.resuming && frame.usage) live.usage(resume.usage);
    // A passed-through start is shadowed, so a resume can carry on where the client's stream is.
    if (passthrough && resume.enabled) { for (const e of events) encoder.encode(e); }
    if (passthrough) return passRaw(frame);
    for (const e of events) {
      const bytes = encoder.encode(e);
      if (bytes) out.push(bytes);
    }
  };
  const release = (frames: UpstreamFrame[]) => {
    for (const frame of frames) output(frame);
    frames.length = 0;
  };
  // A client slow to drain what we have is not upstream silence: the idle clock waits too.
  const drain = async () => {
    hop.idle.pause();
    try {
      await channel.drained();
    } finally {
      hop.idle.resume();
    }
  };
  /** Writes what one read made; a promise only when the client is behind (see `offer`). */
  const flush = (): Promise<void> | undefined => {
    if (out.length === 0) return;
    const bytes = out.length === 1 ? out[0]! : concat(out);
    out.length = 0;
    return channel.offer(bytes) ? drain() : undefined;
  };
  /** One read's frames; a result ends the hop. */
  const take = (frames: UpstreamFrame[]): HopResult | null => {
    for (const frame of frames) {
      hop.ledger.frame(frame);
      if (frame.usage) hop.usage(frame.usage);
      terminal ||= frame.terminal === true;
      finished ||= terminal || finishes(frame);
      if (frame.error) {
        if (hop.attempt.contentSeen) {
          hop.end("error", frame.error);
          return { kind: "stop", error: frame.error };
        }
        hop.fail(frame.error);
        return { kind: "next", error: frame.error };
      }
      if (frame.content) {
        hop.idle.touch();
        if (!hop.attempt.contentSeen) {
          // Hedged: another hop may have claimed the answer already; this one is then stopped.
          if (!hop.claim()) throw hop.controller.signal.reason;
          hop.attempt.firstContent();
          hop.succeeded();
          channel.stopKeepAlives();
          channel.sendHeaders();
          release(held);
          live.contentSent();
        }
        live.lastContentAt = opts.deps.clock.now();
        output(frame);
        continue;
      }
      // A keep-alive frame: passed on only where no other candidate could still answer.
      if (hop.attempt.contentSeen || (opts.isLast && channel.headersSent && !hop.contested)) {
        release(held);
        output(frame);
      } else if (heldBytes + frame.raw.byteLength <= HOLD_LIMIT_BYTES) {
        held.push(frame);
        heldBytes += frame.raw.byteLength;
      }
    }
    return null;
  };
  try {
    const decoder = hop.adapter.frameDecoder?.();
    if (decoder) {
      const reader = hop.reader(res.body, { reuse: true, firstBytes: FIRST_READ_BYTES });
      try {
        for (let chunk = await reader.next(); chunk; chunk = await reader.next()) {
          const result = take(decoder.push(chunk));
          const waiting = flush();
          if (waiting) await waiting;
          if (result) return result;
        }
      } finally {
        reader.close();
      }
      const result = take(decoder.end());
      await flush();
      if (result) return result;
    } else {
      const reader = hop.reader(res.body.pipeThrough(hop.adapter.decodeStream()));
      try {
        for (let frame = await reader.next(); frame; frame = await reader.next()) {
          const result = take([frame]);
          await flush();
          if (result) return result;
        }
      } finally {
        reader.close();
      }
    }
  } catch (err) {
    out.length = 0;
    if (hop.attempt.contentSeen) return afterContent(hop, err);
    throw err;
  }
  if (!hop.attempt.contentSeen) {
    const error = new GatewayError(
      `upstream ${hop.upstream.id} closed the stream before any content`,
      { code: "gw.upstream.bad_response" },
    );
    hop.fail(error);
    return { kind: "next", error };
  }
  if (!finished) {
    // Content went out, so nothing can be tried instead: the client is told the answer was cut.
    const error = new GatewayError(
      `upstream ${hop.upstream.id} ended its stream before the answer was finished`,
      { code: "gw.upstream.incomplete" },
    );
    hop.end("error", error);
    return { kind: "stop", error };
  }
  hop.end(hop.attempt.record.resumeOffset === null ? "success" : "resumed");
  await channel.end({ passthrough, marked: terminal });
  return { kind: "done" };
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

/**
 * After content no failover is possible and a stall is not the upstream's
 * failure (docs/design.md "Failover before content"): the client is told in its stream, cooldown is untouched.
 */
function afterContent(hop: Hop, err: unknown): HopResult {
  const reason = stopReason(hop.controller.signal);
  if (!reason) {
    const detail = err instanceof Error ? err.message : String(err);
    const error = new GatewayError(`upstream ${hop.upstream.id} broke off its stream: ${detail}`, {
      code: "gw.upstream.error",
    });
    hop.end("error", error);
    return { kind: "stop", error };
  }
  if (reason.code !== "gw.upstream.idle_timeout_mid_stream") {
    const result = hop.thrown(err);
    return result.kind === "done" ? result : { kind: "stop", error: result.error };
  }
  hop.reportIdle("mid_stream");
  hop.end("idle_timeout", reason);
  return { kind: "stop", error: reason };
}
