import type { LiveRow, LiveState } from "../api_types.ts";

/** How the operator narrows and orders the live list; empty strings mean "any". */
export interface LiveView {
  route: string;
  upstream: string;
  state: LiveState | "";
  session: string;
  sort: "oldest" | "newest" | "idle";
}

export const ALL_LIVE: LiveView = {
  route: "",
  upstream: "",
  state: "",
  session: "",
  sort: "oldest",
};

const ORDER: Record<LiveView["sort"], (a: LiveRow, b: LiveRow) => number> = {
  oldest: (a, b) => a.startedAt - b.startedAt,
  newest: (a, b) => b.startedAt - a.startedAt,
  // Longest without content first; those with none yet count from their start.
  idle: (a, b) => (b.idleMs ?? b.elapsedMs) - (a.idleMs ?? a.elapsedMs),
};

/** The rows the view lets through, in its order. */
export function viewRows(rows: readonly LiveRow[], view: LiveView): LiveRow[] {
  const session = view.session.trim();
  return rows
    .filter((r) =>
      (!view.route || r.route === view.route) &&
      (!view.upstream || r.upstream === view.upstream) &&
      (!view.state || r.state === view.state) &&
      (!session || (r.sessionId ?? "").includes(session))
    )
    .sort((a, b) => ORDER[view.sort](a, b) || (a.id < b.id ? -1 : 1));
}

/** How many rows are in each state, in the order a request passes through them. */
export function stateTotals(rows: readonly LiveRow[]): [LiveState, number][] {
  const states: LiveState[] = [
    "waiting_for_slot",
    "waiting_for_headers",
    "holding",
    "streaming",
    "finishing",
  ];
  return states
    .map((s): [LiveState, number] => [s, rows.filter((r) => r.state === s).length])
    .filter(([, n]) => n > 0);
}

/** The distinct non-null values of one column, sorted: what a filter can pick from. */
export function choices(rows: readonly LiveRow[], pick: (r: LiveRow) => string | null): string[] {
  return [...new Set(rows.map(pick).filter((v): v is string => v !== null))].sort();
}

/** Output tokens per second since the first content, when both are known. */
export function tokensPerSecond(row: LiveRow): number | null {
  if (row.outputTokens === null || row.firstContentMs === null) return null;
  const streamingMs = row.elapsedMs - row.firstContentMs;
  return streamingMs > 0 ? row.outputTokens / (streamingMs / 1000) : null;
}
