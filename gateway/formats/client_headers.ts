import type { ClientFormat } from "./format.ts";

/**
 * The parts of a client's request besides its body that mean something to a
 * provider of the client's own format: feature headers (`anthropic-beta`
 * switches on what `context_management` or adaptive thinking in the body
 * need), the coding agents' session and feature headers, and query flags
 * (`/v1/messages?beta=true`). Sent on only with a same-format pass-through
 * body; a translation carries neither these nor the body fields they serve.
 */
export interface ClientHeaders {
  headers: [string, string][];
  query: [string, string][];
}

/** What Codex sends besides auth: its identity, its conversation, its beta switches. */
const CODEX_HEADERS = [
  "openai-beta",
  "originator",
  "version",
  "session_id",
  "session-id",
  "conversation_id",
  "thread-id",
  "x-codex-beta-features",
  "x-codex-turn-metadata",
  "x-codex-parent-thread-id",
  "x-openai-subagent",
] as const;

/**
 * Allow-lists, per client format. Anything not named here stays with us.
 * Left out on purpose: `openai-organization` / `openai-project` (they pick an
 * account at OpenAI, and the upstream call is made with our key on ours),
 * `x-goog-user-project` (the same for Google), the SDKs' telemetry
 * (`x-stainless-*`, `x-goog-api-client`, `user-agent`) and device ids
 * (`x-codex-installation-id`).
 */
const FORWARDED_HEADERS: Record<ClientFormat, readonly string[]> = {
  anthropic: ["anthropic-beta", "anthropic-version", "x-app", "x-claude-code-session-id"],
  "openai-chat": CODEX_HEADERS,
  "openai-responses": CODEX_HEADERS,
  // Gemini CLI and Google's SDK send only auth and telemetry.
  gemini: [],
  // Google's REST samples pin the API's revision with `Api-Revision` (the SDK sends none).
  "gemini-interactions": ["api-revision"],
};

const FORWARDED_QUERY: Record<ClientFormat, readonly string[]> = {
  // The Anthropic SDK's beta client (Claude Code) asks for `/v1/messages?beta=true`.
  anthropic: ["beta"],
  "openai-chat": [],
  "openai-responses": [],
  // `alt` is the gateway's own choice per call; `key` is auth.
  gemini: [],
  "gemini-interactions": [],
};

/**
 * Never sent on: credentials, what belongs to one connection, and the
 * gateway's own headers (and any `x-pulsegate-*`). A test checks the lists
 * above against it, so a later addition cannot leak one.
 */
export const NEVER_FORWARDED: readonly string[] = [
  "authorization",
  "x-api-key",
  "x-goog-api-key",
  "proxy-authorization",
  "cookie",
  "host",
  "content-length",
  "content-type",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "x-request-id",
  "x-session-id",
];

/** Whose value says which feature a translation lost, so history keeps it. */
const FEATURE_HEADERS = new Set(["anthropic-beta", "openai-beta", "x-codex-beta-features"]);

export function forwardedHeaderNames(format: ClientFormat): readonly string[] {
  return FORWARDED_HEADERS[format];
}

/** The allowed headers and query flags the client sent. */
export function clientHeaders(format: ClientFormat, request: Request): ClientHeaders {
  const headers: [string, string][] = [];
  const forwarded = FORWARDED_HEADERS[format];
  // Indexed, not for-of: until the function is optimized a for-of makes an object per step
  // (docs/performance_log.md "A request plan").
  for (let i = 0; i < forwarded.length; i++) {
    const name = forwarded[i]!;
    const value = request.headers.get(name);
    if (value !== null) headers.push([name, value]);
  }
  const query: [string, string][] = [];
  const names = FORWARDED_QUERY[format];
  // Most calls have no query at all: no URL parse for them.
  if (names.length === 0 || !request.url.includes("?")) return { headers, query };
  const params = new URL(request.url).searchParams;
  for (const name of names) {
    for (const value of params.getAll(name)) query.push([name, value]);
  }
  return { headers, query };
}

/**
 * What one upstream call gets of the client's parts: all of them with a
 * pass-through body, none with a translation, and then a line for the
 * attempt row naming what was left behind (null when nothing was).
 */
export function clientHeadersFor(
  parts: ClientHeaders | undefined,
  passthrough: boolean,
): { forwarded?: ClientHeaders; dropped: string | null } {
  if (!parts) return { dropped: null };
  if (passthrough) return { forwarded: parts, dropped: null };
  const dropped = [
    ...parts.headers.map((
      [name, value],
    ) => (FEATURE_HEADERS.has(name) ? `${name}: ${value}` : name)),
    ...parts.query.map(([name, value]) => `?${name}=${value}`),
  ];
  return { dropped: dropped.length ? dropped.join("; ") : null };
}

/** An upstream POST as fetch takes it: a url and init, not a Request fetch would copy again. */
export interface UpstreamPost {
  url: string;
  init: { method: "POST"; headers: Headers; body: string };
}

/**
 * The upstream POST. The adapter's own headers (content type, auth, default
 * API version) are set first; forwarded ones go on top, so a client's
 * `anthropic-version` wins while auth, never on a list, cannot be touched.
 */
export function upstreamPostInit(
  url: string,
  opts: { headers: Headers; body: string; forwarded?: ClientHeaders },
): UpstreamPost {
  const { headers } = opts;
  for (const [name, value] of opts.forwarded?.headers ?? []) headers.set(name, value);
  const query = opts.forwarded?.query ?? [];
  let target = url;
  if (query.length) {
    const withQuery = new URL(url);
    for (const [name, value] of query) withQuery.searchParams.append(name, value);
    target = withQuery.href;
  }
  return { url: target, init: { method: "POST", headers, body: opts.body } };
}

export function postRequest(post: UpstreamPost): Request {
  return new Request(post.url, post.init);
}
