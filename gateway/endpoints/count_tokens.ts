import { authorize, configInForce, routeFor } from "../accept/admission.ts";
import { anthropicRequestBody } from "../formats/anthropic/request.ts";
import { planCandidates } from "../route/candidates.ts";
import { baseHeaders, errorResponse } from "../forward/client_channel.ts";
import { type Route, upstreamBaseUrl } from "../config/schema.ts";
import type { ClientCodec, ClientRequestContext, UpstreamKind } from "../formats/format.ts";
import { clientError, GatewayError } from "../runtime/gateway_error.ts";
import { field } from "../formats/gemini/fields.ts";
import { geminiModelPath, geminiRequestBody } from "../formats/gemini/request.ts";
import { checkGuardrails } from "../policy/guardrails.ts";
import type { Candidate, ForwardDeps } from "../forward/hop.ts";
import type { IrRequest } from "../formats/ir.ts";
import type { ProxyDeps } from "../accept/proxy.ts";
import { requireJsonContentType } from "../accept/json_content_type.ts";
import { readJsonBody } from "../accept/read_body.ts";
import { isRecord, parseJson } from "../runtime/json.ts";
import { estimateInputTokens } from "../formats/token_estimate.ts";
import { readCapped, UPSTREAM_CAPS } from "../formats/upstream_caps.ts";
import { affinitySession } from "../route/affinity.ts";
import { requestSession } from "../formats/session_ids.ts";
import { vertexOf } from "../formats/cloud/vertex.ts";

/** A counter upstream slower than this is not waited for: the estimate answers instead. */
const COUNT_TIMEOUT_MS = 10_000;

/** Says where a count came from: `upstream` (its counter) or `estimated` (ours). */
const COUNT_HEADER = "x-pulsegate-token-count";

type Json = Record<string, unknown>;

/** The fields Anthropic's count_tokens takes of a Messages body: sampling settings are refused. */
const ANTHROPIC_COUNT_FIELDS = ["model", "messages", "system", "tools", "tool_choice"];

/** An upstream kind's own token counter: where it lives, what it is sent, what it answers. */
interface Counter {
  path(model: string): string;
  /** The client's body (same format, only the model swapped) or a translation of the IR. */
  body(opts: { ir: IrRequest; passthrough?: Json; model: string }): Json;
  read(answer: unknown): number | null;
}

const COUNTERS: Partial<Record<UpstreamKind, Counter>> = {
  anthropic: {
    path: () => "/v1/messages/count_tokens",
    body: ({ ir, passthrough, model }) => {
      if (passthrough) return { ...passthrough, model };
      const full = anthropicRequestBody({ ...ir, stream: false }, model);
      return Object.fromEntries(
        ANTHROPIC_COUNT_FIELDS.flatMap((k) => k in full ? [[k, full[k]]] : []),
      );
    },
    read: (answer) => countField(answer, "input_tokens"),
  },
  gemini: {
    path: (model) => `/v1beta/${geminiModelPath(model)}:countTokens`,
    body: ({ ir, passthrough, model }) => {
      if (passthrough) return geminiWithModel(passthrough, model);
      // Only the generateContentRequest form carries a system instruction and tools.
      return {
        generateContentRequest: { model: geminiModelPath(model), ...geminiRequestBody(ir) },
      };
    },
    read: (answer) => countField(answer, "totalTokens"),
  },
};

/** The count in each counting client's own shape. */
const COUNT_BODIES: Partial<Record<ClientCodec["format"], (tokens: number) => Json>> = {
  anthropic: (tokens) => ({ input_tokens: tokens }),
  gemini: (tokens) => ({ totalTokens: tokens }),
};

/** What answers the client: the upstream's own bytes (same format) or a number. */
type Counted =
  | { how: "upstream"; passthrough: string }
  | { how: "upstream" | "estimated"; tokens: number };

/**
 * Anthropic's POST /v1/messages/count_tokens and Gemini's `:countTokens`.
 * Admitted like a request (serving, key, route the key may use), then the
 * route's first usable candidate is asked once: through its own counter when
 * its kind has one, otherwise, or when that fails, by our estimate. A count
 * generates nothing and bills nothing, so it takes no slot, charges no
 * cooldown, does not fail over and writes no history row.
 */
export async function handleCountTokens(
  request: Request,
  opts: { codec: ClientCodec; ctx: ClientRequestContext; deps: ProxyDeps },
): Promise<Response> {
  const { codec, deps } = opts;
  const requestId = crypto.randomUUID();
  try {
    const config = configInForce(deps.state);
    const keyId = authorize(request, { config, loopback: deps.state.loopback, env: deps.env });
    requireJsonContentType(request);
    const body = await readJsonBody(request, { signal: request.signal, clock: deps.clock });
    if (!isRecord(body)) {
      throw clientError("request body must be a JSON object", { code: "gw.client.invalid_json" });
    }
    const ir = codec.parseRequest(countedRequest(codec, body), opts.ctx);
    const route = routeFor(config, { model: ir.model, keyId });
    const counted = await count({ request, ir, body, codec, route, keyId }, { ...deps, config });
    return countResponse(codec, { counted, requestId });
  } catch (err) {
    return errorResponse(codec, GatewayError.from(err), { requestId });
  }
}

/** Gemini's count body is `{contents}` or `{generateContentRequest}`; the latter is read whole. */
function countedRequest(codec: ClientCodec, body: Json): Json {
  if (codec.format !== "gemini") return body;
  const inner = field(body, "generateContentRequest");
  return isRecord(inner) ? inner : body;
}

interface CountRequest {
  request: Request;
  ir: IrRequest;
  body: Json;
  codec: ClientCodec;
  route: Route;
  keyId: string | null;
}

async function count(req: CountRequest, deps: ForwardDeps & ProxyDeps): Promise<Counted> {
  const estimate = (): Counted => ({ how: "estimated", tokens: estimateInputTokens(req.ir) });
  // The session as generation names and pins it, in the key's own namespace
  // (docs/security.md "Sessions are per key"): a count goes where the conversation runs.
  const sessionId = affinitySession({
    keyId: req.keyId,
    sessionId: requestSession(req.codec.format, {
      headers: req.request.headers,
      hint: req.ir.sessionHint,
    }),
  });
  const [first] = planCandidates(req.route, { deps, sessionId });
  // Vertex AI counts at other paths than the provider's own: its upstreams get the estimate.
  const counter = first && !vertexOf(first.upstream) && COUNTERS[first.upstream.kind];
  if (!first || !counter) return estimate();
  try {
    // What a guardrail would stop from reaching an upstream is not sent to its counter either.
    await checkGuardrails(req.body, { model: req.ir.model, deps });
    return await askCounter(req, { target: first, counter, deps });
  } catch (err) {
    deps.log.event("count_tokens.estimated", {
      route: req.route.model,
      upstream: first.upstream.id,
      reason: err instanceof Error ? err.message : String(err),
    });
    return estimate();
  }
}

async function askCounter(
  req: CountRequest,
  opts: { target: Candidate; counter: Counter; deps: ForwardDeps },
): Promise<Counted> {
  const { target, counter, deps } = opts;
  const { upstream, candidate } = target;
  const same = req.codec.format === upstream.kind;
  const passthrough = same ? req.body : undefined;
  const ir = { ...req.ir, stream: false };
  // The adapter knows how its upstream authenticates: its request's headers serve the count too.
  const { headers } = await deps.adapters[upstream.kind].buildRequest({
    ir,
    passthrough,
    upstream,
    model: candidate.model,
    env: deps.env,
    config: deps.config,
  });
  const body = counter.body({ ir, passthrough, model: candidate.model });
  const timeout = new AbortController();
  const cancel = deps.clock.after(COUNT_TIMEOUT_MS, () => timeout.abort(new Error("timed out")));
  try {
    const res = await deps.fetch(`${upstreamBaseUrl(upstream)}${counter.path(candidate.model)}`, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      signal: AbortSignal.any([req.request.signal, timeout.signal]),
    });
    const text = await readCapped(res, UPSTREAM_CAPS.errorBodyBytes);
    if (!res.ok) throw new Error(`counter answered ${res.status}`);
    const tokens = counter.read(parseJson(text));
    if (tokens === null) throw new Error("counter answered no count");
    return same ? { how: "upstream", passthrough: text } : { how: "upstream", tokens };
  } finally {
    cancel();
  }
}

function countResponse(
  codec: ClientCodec,
  opts: { counted: Counted; requestId: string },
): Response {
  const { counted } = opts;
  const headers = baseHeaders(opts.requestId, {
    "content-type": "application/json",
    [COUNT_HEADER]: counted.how,
  });
  if ("passthrough" in counted) return new Response(counted.passthrough, { headers });
  const render = COUNT_BODIES[codec.format];
  if (!render) throw new Error(`no count shape for ${codec.format} clients`);
  return new Response(JSON.stringify(render(counted.tokens)), { headers });
}

function countField(answer: unknown, name: string): number | null {
  if (!isRecord(answer)) return null;
  const value = answer[name];
  return typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : null;
}

/** A Gemini count body with its generateContentRequest's model swapped; `{contents}` has none. */
function geminiWithModel(body: Json, model: string): Json {
  const inner = field(body, "generateContentRequest");
  if (!isRecord(inner)) return body;
  const { generate_content_request: _snake, ...rest } = body;
  return { ...rest, generateContentRequest: { ...inner, model: geminiModelPath(model) } };
}
