import type { LiveRow, LiveSnapshot, LiveSort, LiveState, LiveStateCounts } from "../api_types.ts";

/**
 * How the operator narrows and orders the live list; empty strings mean "any". The gateway
 * applies it (docs/admin.md "Live requests"): the tab receives one page, never the whole list.
 */
export interface LiveView {
  /** Part of a request id, session id or key id. */
  q: string;
  route: string;
  upstream: string;
  state: LiveState | "";
  session: string;
  instance: string;
  sort: LiveSort;
}

export const ALL_LIVE: LiveView = {
  q: "",
  route: "",
  upstream: "",
  state: "",
  session: "",
  instance: "",
  sort: "oldest",
};

/** The feed's URL parameters for a view, from the page after `after` (first page: null). */
export function viewQuery(view: LiveView, opts: { after: string | null }): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(view)) {
    const text = String(value).trim();
    if (text !== "" && !(name === "sort" && text === "oldest")) params.set(name, text);
  }
  if (opts.after) params.set("after", opts.after);
  return params.toString();
}

const STATES: LiveState[] = [
  "waiting_for_slot",
  "waiting_for_headers",
  "holding",
  "streaming",
  "finishing",
];

/** How many requests are in each state, in the order a request passes through them. */
export function stateTotals(states: LiveStateCounts): [LiveState, number][] {
  return STATES
    .map((s): [LiveState, number] => [s, states[s] ?? 0])
    .filter(([, n]) => n > 0);
}

export const ALL_STATES: readonly LiveState[] = STATES;

/**
 * A page moved on by a heartbeat: nothing on it changed but the clock, so each row's elapsed
 * and idle times grow by the time since the page was measured.
 */
export function advance(snapshot: LiveSnapshot, at: number): LiveSnapshot {
  const by = Math.max(0, at - snapshot.at);
  if (by === 0) return snapshot;
  return {
    ...snapshot,
    at,
    requests: snapshot.requests.map((r) => ({
      ...r,
      elapsedMs: r.elapsedMs + by,
      idleMs: r.idleMs === null ? null : r.idleMs + by,
    })),
  };
}

/** "101–200 of 5,000": where the page sits among the matching requests. */
export function pageRange(snapshot: LiveSnapshot): string {
  const { offset } = snapshot.page;
  const shown = snapshot.requests.length;
  const of = snapshot.totals.matching.toLocaleString("en");
  if (shown === 0) return `0 of ${of}`;
  return `${(offset + 1).toLocaleString("en")}–${(offset + shown).toLocaleString("en")} of ${of}`;
}

/** Output tokens per second since the first content, when both are known. */
export function tokensPerSecond(row: LiveRow): number | null {
  if (row.outputTokens === null || row.firstContentMs === null) return null;
  const streamingMs = row.elapsedMs - row.firstContentMs;
  return streamingMs > 0 ? row.outputTokens / (streamingMs / 1000) : null;
}
