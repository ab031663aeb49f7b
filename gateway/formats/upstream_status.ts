import type { GatewayCode, StatusSort } from "../runtime/gateway_error.ts";

/**
 * The one sort of an upstream's error status (docs/design.md "Failover before content"): what the
 * status says, and the gateway code its error gets. `upstreamStatusError` builds the error from
 * it and keeps the sort on it; what a hop does next is the verdict table's, which reads the sort
 * (`STATUS_ENDINGS` in gateway/forward/verdict.ts) and never the status again.
 */
const SORTS: Readonly<Record<number, StatusSort>> = {
  401: "credentials",
  403: "credentials",
  // The upstream's own timeout of the call it was sent, not the caller's (docs/design.md).
  408: "upstream_timeout",
  429: "rate_limit",
  500: "overloaded",
  502: "overloaded",
  503: "overloaded",
  504: "overloaded",
  // Anthropic's "overloaded".
  529: "overloaded",
};

/** The gateway code of each sort: whose fault it is, by default, comes with the code. */
export const SORT_CODES: Readonly<Record<StatusSort, GatewayCode>> = {
  credentials: "gw.upstream.credentials",
  upstream_timeout: "gw.upstream.error",
  rate_limit: "gw.upstream.rate_limited",
  overloaded: "gw.upstream.error",
  callers: "gw.upstream.rejected",
  failed: "gw.upstream.error",
};

/**
 * What an upstream's error status says: a status of the table above, else any other 4xx is the
 * caller's request refused (passed on with its status), and anything else a failure of the
 * upstream's (501, a 3xx it should not have answered).
 */
export function sortStatus(status: number): StatusSort {
  return SORTS[status] ?? (status >= 400 && status < 500 ? "callers" : "failed");
}
