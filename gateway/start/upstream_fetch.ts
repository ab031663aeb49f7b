/** Upstream connections idle this long are not reused. */
const UPSTREAM_POOL_IDLE_MS = 4_000;

/**
 * The fetch every upstream call goes through. Pooled connections idle longer than a server's
 * keep-alive timeout (Node's is 5 s) may be closed under us; reusing one fails the next call with
 * "connection reset", so they are dropped sooner. Where the runtime has no
 * `Deno.createHttpClient` (Deno Deploy), the platform's own fetch and pool are used as they are.
 */
export function upstreamFetch(given?: typeof fetch): { fetch: typeof fetch; close: () => void } {
  if (given) return { fetch: given, close: () => {} };
  if (typeof Deno.createHttpClient !== "function") return { fetch, close: () => {} };
  const client = Deno.createHttpClient({ poolIdleTimeout: UPSTREAM_POOL_IDLE_MS });
  return {
    fetch: (input, init) => fetch(input, { ...init, client }),
    close: () => client.close(),
  };
}
