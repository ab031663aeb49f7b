import { REAL_TIME } from "../../runtime/clock.ts";
/**
 * The `Authorization` of a call to Vertex AI: an access token from the environment as it is, or
 * one a service-account key is worth, fetched once per key and renewed before it expires
 * (token_source.ts). Everything that can go wrong is an error charged to the upstream that
 * needed the token, never a crash (docs/providers.md "Vertex AI").
 */
import type { VertexOptions } from "../../config/cloud_schema.ts";
import { HEADER_VALUE } from "../../config/upstream_headers_schema.ts";
import { GatewayError } from "../../runtime/gateway_error.ts";
import type { UpstreamCall } from "../format.ts";
import { fetchAccessToken, readServiceAccount } from "./service_account.ts";
import { TokenSource } from "./token_source.ts";

/** Distinct keys kept at once; past it the oldest is let go (its token is fetched again if needed). */
const MAX_KEYS = 64;

/**
 * One token source per key, by the key's text: every upstream naming the same key shares its
 * token. Process-wide, since a token is good for the whole process. `fetch` is the latest
 * caller's (a gateway's own pooled fetch, or a test's).
 */
interface KeyEntry {
  source: TokenSource;
  fetch: typeof fetch;
}
const keys = new Map<string, KeyEntry>();

function entryFor(keyText: string, fetcher: typeof fetch): KeyEntry {
  const known = keys.get(keyText);
  if (known) {
    known.fetch = fetcher;
    return known;
  }
  // The key is read once, on first use; a key that cannot be read is not kept.
  const account = readServiceAccount(keyText);
  account.catch(() => keys.delete(keyText));
  const entry: KeyEntry = {
    fetch: fetcher,
    source: new TokenSource(async () =>
      fetchAccessToken(await account, { now: REAL_TIME.now(), fetch: entry.fetch })
    ),
  };
  if (keys.size >= MAX_KEYS) keys.delete(keys.keys().next().value!);
  keys.set(keyText, entry);
  return entry;
}

function envValue(call: UpstreamCall, opts: { name: string; what: string }): string {
  const value = call.env(opts.name);
  if (value) return value;
  throw new GatewayError(
    `upstream ${call.upstream.id}: environment variable ${opts.name} (${opts.what}) is not set`,
    { code: "gw.upstream.credentials", source: "config", status: 502 },
  );
}

/** `Bearer <token>` for a Vertex AI upstream. */
export async function vertexAuthorization(
  call: UpstreamCall,
  vertex: VertexOptions,
): Promise<string> {
  if (vertex.access_token_env) {
    const token = envValue(call, { name: vertex.access_token_env, what: "access token" });
    if (!HEADER_VALUE.test(token)) {
      throw new GatewayError(
        `upstream ${call.upstream.id}: ${vertex.access_token_env} holds characters a header ` +
          "cannot carry",
        { code: "gw.upstream.credentials", source: "config", status: 502 },
      );
    }
    return `Bearer ${token}`;
  }
  const keyText = envValue(call, {
    name: vertex.service_account_env!,
    what: "service-account key",
  });
  const { source } = entryFor(keyText, call.fetch ?? fetch);
  try {
    return `Bearer ${await source.token({ signal: call.signal })}`;
  } catch (err) {
    // A stop of the call (its signal's reason) is the hop's to read, as it is.
    if (call.signal?.aborted || !(err instanceof GatewayError)) throw err;
    throw new GatewayError(`upstream ${call.upstream.id}: ${err.message}`, {
      code: err.code,
      source: err.source,
      status: err.status,
      cause: err,
    });
  }
}
