/**
 * What every format folder's `mod.ts` needs and would otherwise repeat: the JSON POST to an
 * upstream with its key in the header its API reads, the SSE stream shape of a client that takes
 * keep-alive comments, and the decoder of an upstream's HTTP error answer. Each folder keeps only
 * what is its own: the path, the auth header, the body builders.
 */
import { type UpstreamPost, upstreamPostInit } from "./client_headers.ts";
import { upstreamStatusError } from "./upstream_error.ts";
import type { ClientStreamShape, UpstreamAdapter, UpstreamCall, UpstreamKind } from "./format.ts";
import { KEEP_ALIVE_BLOCK } from "./sse_stream.ts";
import { upstreamKey } from "./upstream_key.ts";
import { applyUpstreamHeaders } from "./upstream_headers.ts";

/** A JSON POST to the upstream; `auth` names the header the key goes in and how it is written. */
export function jsonPost(
  call: Pick<UpstreamCall, "upstream" | "env" | "forwarded">,
  opts: {
    url: string;
    body: string;
    auth: (key: string) => [name: string, value: string];
    headers?: Record<string, string>;
  },
): Promise<UpstreamPost> {
  const headers = new Headers({ "content-type": "application/json", ...opts.headers });
  const key = upstreamKey(call);
  if (key) headers.set(...opts.auth(key));
  const post = upstreamPostInit(opts.url, { headers, body: opts.body, forwarded: call.forwarded });
  // The operator's headers last: over a client's forwarded one of the same name, never over auth.
  applyUpstreamHeaders(headers, call);
  return Promise.resolve(post);
}

/** `Authorization: Bearer <key>`, as both OpenAI APIs read it. */
export const bearer = (key: string): [string, string] => ["authorization", `Bearer ${key}`];

/** The stream of an SSE client that takes `: keep-alive` comments and `from`'s bytes as they are. */
export function sseShape(
  from: UpstreamKind,
  opts: { endMarker: Uint8Array | null },
): ClientStreamShape {
  return {
    contentType: "text/event-stream; charset=utf-8",
    keepAlive: KEEP_ALIVE_BLOCK,
    passthroughFrom: from,
    endMarker: opts.endMarker,
  };
}

/** An upstream's HTTP error answer read in its kind's vocabulary (gateway/formats/upstream_error.ts). */
export function statusErrors(kind: UpstreamKind): UpstreamAdapter["decodeError"] {
  return (status, body, opts) =>
    upstreamStatusError(status, { body, kind, headers: opts?.headers });
}
