import { baseHeaders } from "./client_channel.ts";
import { runCandidates } from "./failover.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import type { ForwardDeps, ForwardRequest, Hop } from "./hop.ts";
import { ANSWERED, type HopEnding } from "./hop_ending.ts";
import { settleContent } from "./settle.ts";
import { startDeadline } from "./whole_forward.ts";
import { stopReason } from "./stop_reasons.ts";
import { readEmbedAnswer } from "./embed_answer.ts";
import { vectorBudget, type VectorHold } from "./vector_budget.ts";
import { EMBED_UPSTREAMS } from "../formats/embed_formats.ts";
import {
  EMBED_LIMITS,
  type EmbedClient,
  type EmbedInput,
  type EmbedRequest,
  valuesAllowed,
  VectorTally,
} from "../formats/embeddings.ts";
import { estimateTokens } from "../formats/token_estimate.ts";
import { isTokenCount } from "../formats/token_counts.ts";
import { badResponse } from "../formats/upstream_error.ts";

/** An embeddings request on its way through the candidates. */
export interface EmbedForward extends ForwardRequest {
  embed: EmbedRequest;
}

/** What serving an embeddings request came to. */
export interface EmbedOutcome {
  response: Response | null;
  error: GatewayError | null;
  /**
   * Gives back the request's share of the vector budget: the caller's to run once the client
   * has read `response` (or left); already done when there is none.
   */
  release: () => void;
}

/**
 * Serves an embeddings request (docs/providers.md "Embeddings") through the candidate loop of
 * every call: failover before content, retries, slots, cooldown, affinity and one attempt row
 * per hop, each hop ending as a whole answer's does. The answer is never sent early: it is
 * the client's once every vector of it is read and checked. First the request takes what its
 * answer may hold of the process's vector budget (vector_budget.ts), or waits for it as for a
 * slot (`slot_wait_secs`) and is answered 429 `gw.embeddings.memory_full`.
 */
export async function forwardEmbeddings(
  req: EmbedForward,
  opts: { deps: ForwardDeps; client: EmbedClient },
): Promise<EmbedOutcome> {
  const { deps } = opts;
  const hold = await vectorBudget(deps).take(valuesAllowed(req.embed) * 4, {
    waitMs: deps.config.failover.slot_wait_secs * 1000,
    signal: req.live.signal,
  });
  const nothing = () => {};
  if (hold === null) {
    const error = stopReason(req.live.signal) ?? GatewayError.from("stopped");
    return { response: null, error, release: nothing };
  }
  if (hold instanceof GatewayError) return { response: null, error: hold, release: nothing };
  let response: Response | null = null;
  try {
    const error = await runCandidates(req, {
      deps,
      runHop: async (hop) => {
        const answer = await embedHop(hop, { ...opts, embed: req.embed, hold });
        if (!(answer instanceof Response)) return answer;
        response = answer;
        return ANSWERED;
      },
    });
    return { response, error, release: () => hold.release() };
  } finally {
    if (response === null) hold.release();
  }
}

/**
 * Input tokens over a hop's calls: reported, or estimated where a call reported none or a count
 * out of range (docs/security.md "Numbers an upstream reports").
 */
class TokenTally {
  total = 0;
  estimated = false;
  rejected = false;

  add(reported: number | undefined, inputs: EmbedInput[]): void {
    if (isTokenCount(reported)) {
      this.total += reported;
      return;
    }
    if (reported !== undefined) this.rejected = true;
    this.estimated = true;
    // Token ids are their own count; text is estimated as everywhere (token_estimate.ts).
    for (const input of inputs) {
      this.total += input.tokens?.length ?? estimateTokens(input.text ?? "");
    }
  }
}

/**
 * One hop: the request in as many calls as the upstream's batch limit needs, one after another
 * (a hop holds one slot of its upstream, so it keeps one call in flight), each answer read as
 * a whole answer is (timed to its first byte, capped) and checked. Any call that fails ends
 * the hop as it failed, before content: the next candidate starts over. Tokens the calls before
 * it billed stay on the hop's row.
 */
async function embedHop(
  hop: Hop,
  opts: { deps: ForwardDeps; client: EmbedClient; embed: EmbedRequest; hold: VectorHold },
): Promise<HopEnding | Response> {
  const { deps, embed } = opts;
  const upstream = EMBED_UPSTREAMS[hop.upstream.kind];
  if (!upstream) {
    // The plan passes such a candidate over (route/candidates.ts): this is the gateway's fault.
    throw new GatewayError(`upstream ${hop.upstream.id} has no embeddings API`, {
      code: "gw.gateway.internal",
    });
  }
  const model = hop.opts.target.candidate.model;
  const vectors = new VectorTally(embed);
  const tokens = new TokenTally();
  let answerModel: string | undefined;
  let answered = false;
  const cancelDeadline = startDeadline(hop, deps);
  try {
    for (let at = 0; at < embed.inputs.length;) {
      const seen = vectors.vectors[0]?.length;
      const inputs = embed.inputs.slice(at, at + upstream.batchSize(embed, { model, seen }));
      // The reader stopped the idle timer at the last answer's end: the next call is timed anew.
      if (at > 0) hop.idle.touch();
      const built = await hop.build(() =>
        upstream.build({
          req: embed,
          inputs,
          upstream: hop.upstream,
          model,
          env: deps.env,
          config: deps.config,
          signal: hop.controller.signal,
          fetch: deps.fetch,
        })
      );
      const res = await hop.sendBuilt(built);
      if (!res.ok || !res.body) return await hop.failedStatus(res);
      const length = embed.dimensions ?? seen ?? EMBED_LIMITS.dimensions;
      const answer = await readEmbedAnswer(hop, res.body, { upstream, inputs, length });
      if (answer === null) {
        return {
          how: "bad_response",
          error: badResponse(`upstream ${hop.upstream.id} sent an empty answer`),
        };
      }
      const count = inputs.length;
      const piece = upstream.decode(answer, {
        count,
        headers: res.headers,
        upstream: hop.upstream.id,
        model,
      });
      vectors.add(piece, { count, upstream: hop.upstream.id });
      tokens.add(piece.inputTokens, inputs);
      answerModel ??= piece.model;
      at += count;
    }
    if (tokens.rejected) hop.attempt.refused(["inputTokens"]);
    // The answer holds what it holds: the rest of what was set aside for it is free again.
    opts.hold.shrink(vectors.bytes);
    hop.attempt.usage({ inputTokens: tokens.total, outputTokens: 0 });
    settleContent(hop);
    hop.req.live.contentSent();
    if (tokens.estimated) hop.attempt.estimate({ answered: true });
    answered = true;
    const body = opts.client.encode({
      vectors: vectors.vectors,
      model: answerModel ?? embed.model,
      inputTokens: tokens.total,
      estimated: tokens.estimated,
    }, embed);
    const headers = baseHeaders(hop.req.live.record.id, { "content-type": "application/json" });
    return new Response(body, { status: 200, headers });
  } finally {
    cancelDeadline();
    if (!answered && tokens.total > 0) {
      // Calls that answered before one failed were billed: their tokens stay on this hop's row
      // (and its cost), not on the request's, which another hop may yet answer.
      hop.attempt.holdUsage();
      if (tokens.rejected) hop.attempt.refused(["inputTokens"]);
      hop.attempt.usage({ inputTokens: tokens.total, outputTokens: 0 });
      if (tokens.estimated) hop.attempt.estimate({ answered: false });
    }
  }
}
