import { type Upstream, upstreamBaseUrl } from "../../config/schema.ts";

/**
 * Where an Interactions upstream serves its interactions (the paths `@google/genai` calls):
 * `POST /v1beta/interactions` creates one; `GET` and `DELETE /v1beta/interactions/{id}` and
 * `POST /v1beta/interactions/{id}/cancel` act on one it stored.
 */
export function interactionsUrl(
  upstream: Upstream,
  opts: { id?: string; cancel?: boolean } = {},
): string {
  const base = `${upstreamBaseUrl(upstream)}/v1beta/interactions`;
  if (opts.id === undefined) return base;
  return `${base}/${encodeURIComponent(opts.id)}${opts.cancel ? "/cancel" : ""}`;
}

/** Google's API key header, as the SDK sends it. */
export const withGoogleKey = (key: string): [string, string] => ["x-goog-api-key", key];
