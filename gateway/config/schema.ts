/**
 * The gateway config (docs/design.md "Config"). This schema is the single source of truth: validation, the JSON
 * Schema served to the admin page and the reference table in docs/config.md all derive from it,
 * so every field carries a `.describe()` text written for operators.
 */
import { z } from "zod";
import { HistorySchema } from "./history_schema.ts";
import { keyLimitFields, pricesField } from "./limits_schema.ts";
import { envNameField } from "./env_names.ts";
import { MAX_URL_CHARS, withoutTrailingSlashes } from "./trailing_slashes.ts";
import { AzureSchema, checkCloudFields, VertexSchema } from "./cloud_schema.ts";
import { upstreamHeadersField } from "./upstream_headers_schema.ts";
import { keyMcpFields, McpServerSchema, McpSessionsSchema } from "./mcp_schema.ts";

import { UPSTREAM_KINDS, type UpstreamKind } from "../runtime/wire_kinds.ts";
export { UPSTREAM_KINDS, type UpstreamKind };

/** Public endpoints per kind, following each provider SDK's idea of a base URL. */
export const DEFAULT_BASE_URLS = {
  "openai-chat": "https://api.openai.com/v1",
  "openai-responses": "https://api.openai.com/v1",
  "anthropic": "https://api.anthropic.com",
  "gemini": "https://generativelanguage.googleapis.com",
  "gemini-interactions": "https://generativelanguage.googleapis.com",
} as const satisfies Record<Exclude<UpstreamKind, "bedrock">, string>;

// Schema-level messages win over the generic ones in validate.ts, so ranges name both bounds.
function intBetween(min: number, max: number) {
  const range = `must be between ${min} and ${max}`;
  return z.int({ error: `must be a whole number between ${min} and ${max}` })
    .min(min, { error: range }).max(max, { error: range });
}

function numberBetween(min: number, max: number) {
  const range = `must be between ${min} and ${max}`;
  return z.number({ error: `must be a number between ${min} and ${max}` })
    .min(min, { error: range }).max(max, { error: range });
}

function slug() {
  return z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, {
    error: 'must be 1-64 characters of a-z, 0-9, ".", "_" or "-", starting with a letter or digit',
  });
}

const envName = envNameField;

function modelName() {
  return z.string().regex(/^\S{1,256}$/, {
    error: "must be 1-256 characters with no spaces",
  });
}

function enabledFlag(what: string) {
  return z.boolean().default(true).describe(`Set to false to switch this ${what} off.`);
}

export const WholeAnswerDeadlineSchema = z.object({
  base_secs: intBetween(1, 3600).default(60).describe(
    "Seconds every non-streamed answer gets before the per-token allowance.",
  ),
  per_output_token_ms: numberBetween(0, 10000).default(25).describe(
    "Milliseconds added per requested output token (the request's max_tokens).",
  ),
  max_secs: intBetween(1, 3600).default(90).describe(
    "Upper bound of the deadline in seconds, whatever max_tokens asks for.",
  ),
}).strict().superRefine((deadline, ctx) => {
  if (deadline.max_secs < deadline.base_secs) {
    ctx.addIssue({
      code: "custom",
      path: ["max_secs"],
      message: `must be at least base_secs (${deadline.base_secs})`,
    });
  }
});

export const FailoverSchema = z.object({
  idle_timeout_secs: intBetween(30, 3600).default(300).describe(
    "Seconds without content from an upstream before the gateway stops waiting and fails over " +
      "(or ends the stream once content has reached the client). Keep-alives do not count.",
  ),
  slot_wait_secs: intBetween(0, 300).default(30).describe(
    "Seconds a request with affinity may wait for a free slot (max_in_flight) on its upstream " +
      "before it is answered 429 with Retry-After; also how long an embeddings request may wait " +
      "for room in the process's budget of vectors (429 gw.embeddings.memory_full).",
  ),
  failures_to_pause: intBetween(1, 100).default(3).describe(
    "Consecutive failures (before content) that pause an upstream (cooldown).",
  ),
  pause_secs: intBetween(1, 86400).default(60).describe(
    "Length of the first cooldown pause in seconds; each further pause doubles it.",
  ),
  max_pause_secs: intBetween(1, 86400).default(600).describe(
    "Cap in seconds for the doubling cooldown pause; at least pause_secs.",
  ),
  retries_per_candidate: intBetween(0, 10).default(1).describe(
    "Retries on the same candidate, with backoff, after a retryable upstream failure " +
      "(connection error, 429, 500, 502, 503, 504) before failing over.",
  ),
  whole_answer_deadline: WholeAnswerDeadlineSchema.nullable().default(null).describe(
    "Off (null) by default. Caps a non-streamed answer at " +
      "min(max_secs, base_secs + max_tokens x per_output_token_ms), for deployments behind a " +
      "proxy whose origin timeout would otherwise cut the answer with an opaque page.",
  ),
  timeout_status: z.literal([504, 503], { error: "must be 504 or 503" }).default(504).describe(
    "HTTP status sent when no candidate is left before the response headers went out. Use 503 " +
      "behind a proxy that replaces 502/504 bodies with its own page.",
  ),
}).strict().superRefine((failover, ctx) => {
  if (failover.max_pause_secs < failover.pause_secs) {
    ctx.addIssue({
      code: "custom",
      path: ["max_pause_secs"],
      message: `must be at least pause_secs (${failover.pause_secs})`,
    });
  }
});

const upstreamId = () =>
  slug().describe(
    "Unique name of the upstream; routes refer to it and it labels history and metrics.",
  );

const baseUrl = () =>
  z.url({ protocol: /^https?$/, error: "must be an http:// or https:// URL" })
    .max(MAX_URL_CHARS, { error: `must be at most ${MAX_URL_CHARS} characters` }).optional()
    .describe(
      "Base URL in the provider SDK's convention; the gateway appends the API path. " +
        "Omit for the public endpoint: https://api.openai.com/v1 (openai kinds), " +
        "https://api.anthropic.com (anthropic), https://generativelanguage.googleapis.com " +
        "(gemini, gemini-interactions), https://bedrock-runtime.{region}.amazonaws.com (bedrock). " +
        "With azure: the resource endpoint, required (https://{resource}.openai.azure.com); with " +
        "vertex: https://{location}-aiplatform.googleapis.com by default.",
    );

const maxInFlight = () =>
  intBetween(1, 100000).default(64).describe(
    "Most live requests this upstream gets at once; more wait or go to another candidate.",
  );

function keyedUpstream<
  K extends Exclude<UpstreamKind, "bedrock">,
  X extends z.ZodRawShape = Record<never, never>,
>(kind: K, extra: X = {} as X) {
  return z.object({
    kind: z.literal(kind).describe("Wire format and provider of the upstream."),
    id: upstreamId(),
    base_url: baseUrl(),
    api_key_env: envName().optional().describe(
      "Name of the env var holding the API key. Omit for a keyless (e.g. local) server.",
    ),
    max_in_flight: maxInFlight(),
    prices: pricesField(),
    headers: upstreamHeadersField(),
    ...extra,
    enabled: enabledFlag("upstream"),
  }).strict().superRefine(checkCloudFields);
}

// Azure OpenAI and Vertex AI are options of the kinds whose API they serve (cloud_schema.ts).
const azureField = {
  azure: AzureSchema.optional().describe(
    "Azure OpenAI: the URL shapes and auth header of an Azure resource (docs/providers.md).",
  ),
};
const vertexField = {
  vertex: VertexSchema.optional().describe(
    "Vertex AI: the model's URL under a Google Cloud project and OAuth from a service account " +
      "or an access token, in place of api_key_env (docs/providers.md).",
  ),
};

const BedrockUpstreamSchema = z.object({
  kind: z.literal("bedrock").describe("Wire format and provider of the upstream."),
  id: upstreamId(),
  base_url: baseUrl(),
  region: z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d+$/, {
    error: "must be an AWS region such as us-east-1",
  }).describe("AWS region of the Bedrock runtime, e.g. us-east-1."),
  access_key_env: envName().describe("Name of the env var holding the AWS access key id."),
  secret_key_env: envName().describe("Name of the env var holding the AWS secret access key."),
  session_token_env: envName().optional().describe(
    "Name of the env var holding an AWS session token, for temporary credentials.",
  ),
  max_in_flight: maxInFlight(),
  prices: pricesField(),
  headers: upstreamHeadersField(),
  enabled: enabledFlag("upstream"),
}).strict();

export const UpstreamSchema = z.discriminatedUnion("kind", [
  keyedUpstream("openai-chat", azureField),
  keyedUpstream("openai-responses", azureField),
  keyedUpstream("anthropic", vertexField),
  keyedUpstream("gemini", vertexField),
  keyedUpstream("gemini-interactions"),
  BedrockUpstreamSchema,
]);

// Hedged start (docs/liveness.md): per route, and a candidate may override either field.
const HEDGE_AFTER_TEXT = "Seconds a candidate may stay without content before the next one is " +
  "started beside it (a hedge); the first to send content answers, the others are cancelled " +
  "(hedge_lost, no cooldown). Can double the bill of a slow start. Omit to never hedge.";
const MAX_HEDGES_TEXT = "Most hedges one request may start; with 2, a third candidate joins " +
  "when the first two are still silent a further hedge_after_secs later.";
function hedgeFields(owner: "route" | "candidate") {
  const over = owner === "candidate" ? " Overrides the route's value." : "";
  const maxHedges = intBetween(1, 3);
  return {
    hedge_after_secs: numberBetween(0.1, 3600).optional().describe(HEDGE_AFTER_TEXT + over),
    max_hedges: (owner === "route" ? maxHedges.default(1) : maxHedges.optional()).describe(
      MAX_HEDGES_TEXT + over,
    ),
  };
}

// Liveness beyond failover (docs/liveness.md): the first-content timeout and the move to a
// larger context window. Off unless set; a candidate's own timeout wins over its route's.
const liveRouteFields = {
  first_content_timeout_secs: intBetween(1, 3600).optional().describe(
    "Seconds a candidate of this route may take to send its first content (keep-alives do not " +
      "count) before it is given up on as an idle timeout before content and the next " +
      "candidate is tried (code gw.upstream.first_content_timeout). Off when unset; lets a " +
      "route demand a quick first token while idle_timeout_secs stays long for slow, steady " +
      "answers.",
  ),
  on_context_overflow: z.literal("next", { error: 'must be "next"' }).optional().describe(
    'Set to "next" to answer an upstream\'s context-length refusal by trying the next ' +
      "candidate whose context_window is larger than the refusing one's. Unset, the refusal " +
      "is returned to the client as it is.",
  ),
};

const liveCandidateFields = {
  first_content_timeout_secs: intBetween(1, 3600).optional().describe(
    "This candidate's own first_content_timeout_secs, in place of its route's.",
  ),
  context_window: intBetween(1, 100_000_000).optional().describe(
    "Context window of this candidate's model in tokens. With the route's " +
      'on_context_overflow "next", only a candidate with a larger context_window than the ' +
      "refusing one is tried after a context-length refusal; one without it is skipped.",
  ),
};

const candidateFields = {
  upstream: z.string().describe("id of an upstream in `upstreams`."),
  model: modelName().describe("Model name sent to that upstream."),
  ...liveCandidateFields,
  enabled: enabledFlag("candidate"),
  ...hedgeFields("candidate"),
  // Mid-stream resume (docs/liveness.md), with the route's `resume_after_content`.
  accepts_prefill: z.boolean().default(false).describe(
    "This candidate's upstream continues a trailing assistant message (prefill). With the " +
      'route\'s `resume_after_content` "prefill" only such candidates resume a stream that ' +
      'broke after content; with "auto" they resume it by prefill and the others by replay. ' +
      "Never guessed from the kind: say so only for an upstream that does.",
  ),
};

export const CandidateSchema = z.object(candidateFields).strict().meta({ title: "candidate" });

// Pools (docs/design.md "Pools"): an entry of a route's candidates that spreads load over its
// members by a pick; the list around it stays ordered.
export const POOL_PICKS = ["weighted", "least_latency", "least_busy", "cheapest"] as const;
export type PoolPick = (typeof POOL_PICKS)[number];
/** The most members one pool takes: a request orders them all, so the bound keeps that cheap. */
export const MAX_POOL_MEMBERS = 64;

export const PoolMemberSchema = z.object({
  ...candidateFields,
  weight: z.number({ error: "must be a number above 0 and at most 1000000" })
    .positive({ error: "must be above 0" }).max(1_000_000, { error: "must be at most 1000000" })
    .default(1).describe(
      "This member's share of the pool's traffic against the other members' weights (3 and 1: " +
        "75 % and 25 %). With a pick other than weighted it splits the traffic between members " +
        "the pick finds equal (equally fast, busy or cheap).",
    ),
}).strict().meta({ title: "pool member" });

export const PoolSchema = z.object({
  pool: z.array(PoolMemberSchema).min(1, { error: "must list at least one member" })
    .max(MAX_POOL_MEMBERS, { error: `must list at most ${MAX_POOL_MEMBERS} members` }).describe(
      "Candidates that share this place in the list. A request tries the member the pick " +
        "chooses, then the pool's other members in the pick's order, then the route's next entry.",
    ),
  pick: z.enum(POOL_PICKS, {
    error: `must be one of ${POOL_PICKS.map((p) => `"${p}"`).join(", ")}`,
  }).default("weighted").describe(
    "How the first member is chosen: weighted (at random by weight), least_latency (the lowest " +
      "EWMA of first-content time plus 100 content tokens at the measured tokens/s, members " +
      "within 25 % or 50 ms of it shared by weight, with a share of exploration), least_busy " +
      "(the lowest share of its max_in_flight in use, its recent failures counted as slots in " +
      "use), cheapest (the lowest input + output " +
      "price for the member's model in upstreams[].prices; unpriced last).",
  ),
  explore_share: numberBetween(0, 0.5).optional().describe(
    "least_latency only: the share of requests sent first to the member measured longest ago " +
      "among those outside the fastest, so a member that recovered is measured again. 0.03 " +
      "when omitted.",
  ),
}).strict().meta({ title: "pool" });

export const RouteEntrySchema = z.union([CandidateSchema, PoolSchema]);

export const RouteSchema = z.object({
  model: modelName().describe(
    "Model name clients ask for; unique across routes. Selects this route.",
  ),
  candidates: z.array(RouteEntrySchema).min(1, { error: "must list at least one candidate" })
    .describe(
      "Upstreams to try, in order, failing over from one to the next. An entry is one " +
        "candidate, or a pool of them (an object with `pool`) that spreads load by its `pick`.",
    ),
  drop_unsupported_tools: z.boolean().default(false).describe(
    "Send a candidate a request with provider-run tools its kind has no equivalent for " +
      "(e.g. web search to openai-chat or bedrock), leaving those tools out. When false, " +
      "such a candidate is skipped and the client's error names it and the tool.",
  ),
  ...liveRouteFields,
  // Mid-stream resume (docs/liveness.md), with each candidate's `accepts_prefill`.
  resume_after_content: z.enum(["prefill", "replay", "auto"]).nullable().default(null).describe(
    "When a stream that already sent content to the client breaks (idle timeout, broken " +
      "connection, in-stream error), continue it on the route's next untried candidate and " +
      'relay only what follows into the same client stream. "prefill": only candidates with ' +
      "`accepts_prefill`, sent the request plus the text delivered so far as a trailing " +
      'assistant message; a stream that delivered a tool call is not resumed. "replay": any ' +
      "candidate, sent the original request; its answer is held and compared with what the " +
      "client has, and relayed only from where it has matched all of it (a divergence ends the " +
      'stream with the original error). "auto": prefill on candidates with ' +
      "`accepts_prefill`, replay on the others. null: off, the stream ends with an error event.",
  ),
  enabled: enabledFlag("route"),
  ...hedgeFields("route"),
}).strict();

export const KeySchema = z.object({
  id: slug().describe("Unique name of the key; it labels history."),
  key_env: envName({ gatewayKey: true }).describe(
    "Name of the env var holding the gateway key clients send.",
  ),
  routes: z.array(z.string()).min(1, {
    error: "must name at least one route (omit it to allow every route)",
  }).optional().describe("Route models this key may use. Omit to allow every route."),
  ...keyLimitFields(),
  ...keyMcpFields(),
  accepts_unseen_continuations: z.boolean().default(false).describe(
    "Let this key name a continuation id or token the gateway never handed out (a " +
      "`previous_response_id`, `conversation`, `item_reference` or Interactions " +
      "`continuation_token` made before this release, or directly at the provider). Off: such " +
      "a request answers 404 (gw.client.unknown_continuation), since the gateway cannot tell " +
      "whose it is. One handed to another key answers 404 either way.",
  ),
  enabled: enabledFlag("key"),
}).strict();

type Issues = z.RefinementCtx<unknown>;
type CheckedCandidate = { upstream: string; model: string; accepts_prefill: boolean };
type CheckedEntry = CheckedCandidate | {
  pool: CheckedCandidate[];
  pick: PoolPick;
  explore_share?: number | undefined;
};
type Checked = {
  upstreams: { id: string; kind: string }[];
  routes: { model: string; candidates: CheckedEntry[] }[];
  keys: {
    id: string;
    key_env: string;
    routes?: string[] | undefined;
    mcp_servers?: string[] | undefined;
  }[];
  mcp_servers: { id: string }[];
};

/** Every candidate of a route, a pool's members included, with its path in the config. */
function routeCandidates(
  route: Checked["routes"][number],
  r: number,
): { candidate: CheckedCandidate; path: PropertyKey[] }[] {
  return route.candidates.flatMap((entry, c) =>
    "pool" in entry
      ? entry.pool.map((candidate, m) => ({
        candidate,
        path: ["routes", r, "candidates", c, "pool", m],
      }))
      : [{ candidate: entry, path: ["routes", r, "candidates", c] }]
  );
}

/**
 * A pool's members are told apart by upstream and model (their latency is measured per
 * member), and `explore_share` belongs to the one pick that explores.
 */
function flagPoolProblems(config: Checked, ctx: Issues) {
  config.routes.forEach((route, r) =>
    route.candidates.forEach((entry, c) => {
      if (!("pool" in entry)) return;
      const at = ["routes", r, "candidates", c];
      flagDuplicates(entry.pool.map((m) => JSON.stringify([m.upstream, m.model])), ctx, {
        at: (i) => [...at, "pool", i, "model"],
        message: (_, first) =>
          `the pool already has this upstream and model at ${first.slice(0, -1).join(".")}; ` +
          "each member must differ in upstream or model",
      });
      if (entry.explore_share !== undefined && entry.pick !== "least_latency") {
        ctx.addIssue({
          code: "custom",
          path: [...at, "explore_share"],
          message: 'only a pool with pick "least_latency" explores',
        });
      }
    })
  );
}

function flagDuplicates(
  values: string[],
  ctx: Issues,
  opts: {
    at: (i: number) => PropertyKey[];
    message?: (value: string, firstPath: PropertyKey[]) => string;
  },
) {
  const firstSeen = new Map<string, number>();
  const message = opts.message ?? duplicateMessage;
  values.forEach((value, i) => {
    const first = firstSeen.get(value);
    if (first === undefined) {
      firstSeen.set(value, i);
      return;
    }
    ctx.addIssue({ code: "custom", path: opts.at(i), message: message(value, opts.at(first)) });
  });
}

function duplicateMessage(value: string, firstPath: PropertyKey[]): string {
  const owner = firstPath.slice(0, -1).map(String).join(".");
  const field = String(firstPath.at(-1));
  return `"${value}" is already used by ${owner}; each ${field} must be unique`;
}

function flagUnknownUpstreams(config: Checked, ctx: Issues) {
  const ids = new Set(config.upstreams.map((u) => u.id));
  config.routes.forEach((route, r) =>
    routeCandidates(route, r).forEach(({ candidate, path }) => {
      if (ids.has(candidate.upstream)) return;
      ctx.addIssue({
        code: "custom",
        path: [...path, "upstream"],
        message: `no upstream has id "${candidate.upstream}"`,
      });
    })
  );
}

function flagUnknownKeyRoutes(config: Checked, ctx: Issues) {
  const models = new Set(config.routes.map((route) => route.model));
  config.keys.forEach((key, k) =>
    (key.routes ?? []).forEach((model, m) => {
      if (models.has(model)) return;
      ctx.addIssue({
        code: "custom",
        path: ["keys", k, "routes", m],
        message: `no route has model "${model}"`,
      });
    })
  );
}

function flagUnknownKeyMcpServers(config: Checked, ctx: Issues) {
  const ids = new Set(config.mcp_servers.map((m) => m.id));
  config.keys.forEach((key, k) =>
    (key.mcp_servers ?? []).forEach((id, m) => {
      if (ids.has(id)) return;
      ctx.addIssue({
        code: "custom",
        path: ["keys", k, "mcp_servers", m],
        message: `no mcp_servers entry has id "${id}"`,
      });
    })
  );
}

/**
 * The Responses API has no prefill: an assistant turn last is taken as a past answer, not
 * continued. Nor does the Interactions API document one (a model_output step last).
 */
const NO_PREFILL = new Set(["openai-responses", "gemini-interactions"]);

function flagPrefillKinds(config: Checked, ctx: Issues) {
  const kinds = new Map(config.upstreams.map((u) => [u.id, u.kind]));
  config.routes.forEach((route, r) =>
    routeCandidates(route, r).forEach(({ candidate, path }) => {
      const kind = kinds.get(candidate.upstream);
      if (!candidate.accepts_prefill || kind === undefined || !NO_PREFILL.has(kind)) return;
      ctx.addIssue({
        code: "custom",
        path: [...path, "accepts_prefill"],
        message: `${/^[aeiou]/.test(kind) ? "an" : "a"} ${kind} upstream cannot continue a prefill`,
      });
    })
  );
}

function checkReferences(config: Checked, ctx: Issues) {
  const at = (list: string, field: string) => (i: number) => [list, i, field];
  flagDuplicates(config.upstreams.map((u) => u.id), ctx, { at: at("upstreams", "id") });
  flagDuplicates(config.routes.map((r) => r.model), ctx, { at: at("routes", "model") });
  flagDuplicates(config.keys.map((k) => k.id), ctx, { at: at("keys", "id") });
  // Two keys reading one env var share a secret, so requests could not be told apart.
  flagDuplicates(config.keys.map((k) => k.key_env), ctx, { at: at("keys", "key_env") });
  flagUnknownUpstreams(config, ctx);
  flagUnknownKeyRoutes(config, ctx);
  flagDuplicates(config.mcp_servers.map((m) => m.id), ctx, { at: at("mcp_servers", "id") });
  flagUnknownKeyMcpServers(config, ctx);
  flagPrefillKinds(config, ctx);
  flagPoolProblems(config, ctx);
}

/** docs/design.md "Abort and disconnect": how long an operator's abort keeps what it stopped stopped. */
export const AbortSchema = z.object({
  session_fence_secs: intBetween(0, 86400).default(600).describe(
    "Seconds a session abort fences the session: its new requests (the aborting key's, or every " +
      "key's for the admin token) are refused with gw.session.fenced until then, or until an " +
      "operator lifts the fence (DELETE /admin/api/fences/{id}). 0 turns session fences off.",
  ),
  turn_fence_secs: intBetween(0, 86400).default(120).describe(
    "Seconds a request abort fences the retry of that turn: a request of the same key and " +
      "session carrying the same conversation is refused with gw.turn.fenced; a new turn passes. " +
      "0 turns turn fences off.",
  ),
}).strict();

export const ConfigSchema = z.object({
  $schema: z.string().optional().describe(
    "Optional JSON Schema reference for editor completion; the gateway ignores it.",
  ),
  failover: FailoverSchema.prefault({}).describe(
    "Timeouts, retries and cooldown shared by every route. Omit for all defaults.",
  ),
  abort: AbortSchema.prefault({}).describe(
    "What an operator's abort leaves behind: fences that refuse the session's, or the aborted " +
      "turn's, retries for a while. Omit for the defaults.",
  ),
  upstreams: z.array(UpstreamSchema).min(1, { error: "must list at least one upstream" })
    .describe("Providers the gateway can call. Discriminated by `kind`."),
  routes: z.array(RouteSchema).min(1, { error: "must list at least one route" }).describe(
    "Model names clients can ask for, each with its ordered candidates.",
  ),
  keys: z.array(KeySchema).default([]).describe(
    "Gateway keys clients authenticate with. With none, the proxy is open (loopback only).",
  ),
  history: HistorySchema.prefault({}).describe(
    'How long history is kept (docs/scaling.md "Retention"). Omit for all defaults.',
  ),
  mcp_servers: z.array(McpServerSchema).max(64, { error: "must list at most 64 servers" })
    .default([]).describe(
      "Tool servers (MCP, Streamable HTTP) clients reach through POST /mcp, their tools named " +
        '"<server id>__<tool name>" (docs/mcp.md). Omit for none.',
    ),
  mcp_sessions: McpSessionsSchema.prefault({}).describe(
    "Bounds of the MCP sessions of /mcp, in number and age. Omit for the defaults.",
  ),
}).strict().superRefine(checkReferences);

export type Config = z.output<typeof ConfigSchema>;
export type ConfigInput = z.input<typeof ConfigSchema>;
export type FailoverConfig = z.output<typeof FailoverSchema>;
export type AbortConfig = z.output<typeof AbortSchema>;
export type WholeAnswerDeadline = z.output<typeof WholeAnswerDeadlineSchema>;
export type Upstream = z.output<typeof UpstreamSchema>;
export type BedrockUpstream = Extract<Upstream, { kind: "bedrock" }>;
export type RouteCandidate = z.output<typeof CandidateSchema>;
export type PoolMember = z.output<typeof PoolMemberSchema>;
export type PoolEntry = z.output<typeof PoolSchema>;
/** One entry of `routes[].candidates`: a candidate, or a pool of them. */
export type RouteEntry = z.output<typeof RouteEntrySchema>;
export type Route = z.output<typeof RouteSchema>;
export type GatewayKey = z.output<typeof KeySchema>;

/** The base URL to call, without a trailing slash, so callers can append `/chat/completions`. */
export function upstreamBaseUrl(upstream: Upstream): string {
  const url = upstream.base_url ?? defaultBaseUrl(upstream);
  return withoutTrailingSlashes(url);
}

function defaultBaseUrl(upstream: Upstream): string {
  if (upstream.kind === "bedrock") {
    return `https://bedrock-runtime.${upstream.region}.amazonaws.com`;
  }
  if ("vertex" in upstream && upstream.vertex) return vertexHost(upstream.vertex.location);
  return DEFAULT_BASE_URLS[upstream.kind];
}

/** Vertex AI's host for a location: regional, or the global endpoint. */
export function vertexHost(location: string): string {
  return location === "global"
    ? "https://aiplatform.googleapis.com"
    : `https://${location}-aiplatform.googleapis.com`;
}
