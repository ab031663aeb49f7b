import { StreamChannel } from "./client_channel.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import { runCandidates, type RunHop } from "./failover.ts";
import { ResumePass } from "./resume_pass.ts";
import { StreamResume } from "./stream_resume.ts";
import type { ForwardDeps, ForwardRequest, Hop } from "./hop.ts";
import type { HopEnding } from "./hop_ending.ts";
import { clientDisconnected } from "./stop_reasons.ts";
import { type PumpOpts, StreamPump } from "./stream_pump.ts";

/** docs/design.md "Failover before content": how long a streamed answer may be held before headers go out. */
export const OPENING_HOLD_MS = 15_000;
export const KEEP_ALIVE_MS = 15_000;

/**
 * Serves a streamed answer. Resolves with the response as soon as its
 * headers are decided; the stream itself runs on, and `done` settles when
 * the request has ended and is settled.
 */
export function forwardStream(
  req: ForwardRequest,
  deps: ForwardDeps,
): { response: Promise<Response>; done: Promise<void> } {
  const { live, codec, ctx } = req;
  const shape = codec.streamShape(ctx);
  const encoder = codec.streamEncoder({
    ...ctx,
    id: live.record.id,
    model: req.ir.model,
    now: deps.clock.now,
  });
  const channel = new StreamChannel({
    codec,
    shape,
    encoder,
    requestId: live.record.id,
    clock: deps.clock,
    keepAliveMs: KEEP_ALIVE_MS,
    onCancel: () => live.abort(clientDisconnected()),
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
  // Only a route that resumes watches its hops: the others hold nothing for it.
  const pass = resume.enabled ? new ResumePass(req, { deps, resume, channel }) : null;
  const done = (async () => {
    let error: GatewayError | null = null;
    try {
      const runHop: RunHop = (hop, opts) =>
        streamHop(hop, { ...opts, shape, channel, encoder, resume });
      error = await runCandidates(req, { deps, runHop, onSettled: pass?.watch });
      if (pass) error = await pass.after(error, runHop);
    } catch (err) {
      // A bug must still end the client's stream and the row, never an unhandled rejection.
      error = GatewayError.from(err);
      deps.log.event("gateway.internal_error", { error: String(err) });
    } finally {
      cancelHold();
      if (error) await channel.fail(error);
      // Settled here; the request handler's `finally` writes the row (accept/proxy.ts).
      live.end({ status: error?.status ?? 200, error: error ?? undefined });
    }
  })();
  return { response: channel.response, done };
}

/**
 * One hop of a streamed answer: its status, or its stream through a pump (stream_pump.ts). The
 * pump's promise is returned, not awaited: this frame then does not stay suspended for the
 * stream's whole life (a held stream's heap, docs/benchmarks.md).
 */
async function streamHop(hop: Hop, opts: PumpOpts): Promise<HopEnding> {
  const res = await hop.send();
  if (!res.ok || !res.body) return await hop.failedStatus(res);
  return new StreamPump(hop, opts).run(res.body);
}
