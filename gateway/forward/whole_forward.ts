import { baseHeaders } from "./client_channel.ts";
import { runCandidates } from "./failover.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import type { ForwardDeps, ForwardRequest, Hop } from "./hop.ts";
import { ANSWERED, type HopEnding } from "./hop_ending.ts";
import { wholePassesThrough } from "../route/passthrough.ts";
import { settleContent } from "./settle.ts";
import { bindContinuations } from "./bind_continuations.ts";
import { deadlineExceeded } from "./stop_reasons.ts";
import { oversized, UPSTREAM_CAPS } from "../formats/upstream_caps.ts";

/**
 * Serves a whole (non-streamed) answer: never answered early, each hop timed
 * from sending to its first non-whitespace byte, the whole answer optionally
 * capped by `whole_answer_deadline`.
 */
export async function forwardWhole(
  req: ForwardRequest,
  deps: ForwardDeps,
): Promise<{ response: Response | null; error: GatewayError | null }> {
  let response: Response | null = null;
  const error = await runCandidates(req, {
    deps,
    runHop: async (hop) => {
      const answer = await wholeHop(hop, deps);
      if (!(answer instanceof Response)) return answer;
      response = answer;
      return ANSWERED;
    },
  });
  return { response, error };
}

/** One hop of a whole answer: the client's response, or how the hop ended without one. */
async function wholeHop(hop: Hop, deps: ForwardDeps): Promise<HopEnding | Response> {
  const cancelDeadline = startDeadline(hop, deps);
  try {
    const passthrough = wholePassesThrough(hop.req, hop.upstream.kind);
    const res = await hop.send();
    if (!res.ok || !res.body) return await hop.failedStatus(res);
    const text = await readUntilContent(hop, res.body);
    if (text.trim() === "") {
      const error = new GatewayError(`upstream ${hop.upstream.id} sent an empty answer`, {
        code: "gw.upstream.bad_response",
      });
      return { how: "bad_response", error };
    }
    const ir = hop.adapter.decodeWhole(text);
    hop.answerId = ir.id;
    bindContinuations(hop, ir.continuations);
    hop.ledger.answer(ir);
    hop.attempt.usage(ir.usage);
    settleContent(hop);
    hop.req.live.contentSent();
    const body = passthrough ? text : JSON.stringify(
      hop.req.codec.encodeWhole({ ...ir, model: ir.model || hop.req.ir.model }, {
        ...hop.req.ctx,
        now: hop.opts.deps.clock.now,
      }),
    );
    const headers = baseHeaders(hop.req.live.record.id, { "content-type": "application/json" });
    return new Response(body, { status: 200, headers });
  } finally {
    cancelDeadline();
  }
}

/**
 * Reads the body. Until the first non-whitespace byte only that byte ends the
 * wait (docs/design.md "Failover before content"); after it, any bytes restart the idle timer, so a body that
 * stalls half-way is given up on (and, as nothing reached the client yet,
 * fails over) instead of being waited on for ever. A body over `cap` (default
 * UPSTREAM_CAPS.answerBytes) is a failed hop too: the read stops there. `bills: false` (an
 * embeddings answer, whose tokens are the input's): its text is not counted as output. With
 * `take`, each piece of text goes there as it arrives and none is kept (answers "").
 */
export async function readUntilContent(
  hop: Hop,
  body: ReadableStream<Uint8Array>,
  opts: { bills?: boolean; cap?: number; take?: (text: string) => void | Promise<void> } = {},
): Promise<string> {
  const bills = opts.bills ?? true;
  const cap = opts.cap ?? UPSTREAM_CAPS.answerBytes;
  const take = opts.take;
  const decoder = new TextDecoder();
  const parts: string[] = [];
  let size = 0;
  let started = false;
  const reader = hop.reader(body, { reuse: true });
  try {
    for (let chunk = await reader.next(); chunk; chunk = await reader.next()) {
      size += chunk.byteLength;
      if (size > cap) throw oversized("an answer", cap);
      const text = decoder.decode(chunk, { stream: true });
      // Leading whitespace is no content, and bills nothing.
      if (bills && (started || text.trim() !== "")) hop.ledger.text(text.length);
      if (started) hop.idle.touch();
      // Only the new text is looked at: leading whitespace is not rescanned per chunk.
      else if (text.trim() !== "") {
        started = true;
        // Hedged: the first byte is the race point; a hop that lost it is being stopped.
        if (!hop.claim()) throw hop.controller.signal.reason;
        hop.idle.touch();
      }
      if (take) await take(text);
      else parts.push(text);
    }
  } finally {
    reader.close();
  }
  hop.idle.stop();
  const rest = decoder.decode();
  if (!take) return parts.join("") + rest;
  if (rest !== "") await take(rest);
  return "";
}

/** The cancel of a deadline never set: one for every hop of a config without one. */
const NO_DEADLINE = () => {};

/** `whole_answer_deadline` for one hop, if the config sets it; answers its cancel. */
export function startDeadline(hop: Hop, deps: ForwardDeps): () => void {
  const deadline = deps.config.failover.whole_answer_deadline;
  if (!deadline) return NO_DEADLINE;
  const maxTokens = hop.req.ir.maxTokens;
  const secs = maxTokens === undefined ? deadline.max_secs : Math.min(
    deadline.max_secs,
    deadline.base_secs + (maxTokens * deadline.per_output_token_ms) / 1000,
  );
  return deps.clock.after(
    secs * 1000,
    () =>
      hop.controller.abort(deadlineExceeded(hop.upstream.id, {
        secs,
        timeoutStatus: deps.config.failover.timeout_status,
      })),
  );
}
