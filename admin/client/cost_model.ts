import { signal } from "@preact/signals";
import type { CostReport, KeysView } from "../api_types.ts";
import { type AdminApi, describeFailure, tooLarge } from "./api.ts";

/** The periods the Cost panel offers, each ending now. */
export const COST_PERIODS = {
  hour: { label: "last hour", ms: 3_600_000 },
  day: { label: "last day", ms: 86_400_000 },
  month: { label: "last 30 days", ms: 30 * 86_400_000 },
} as const;
export type CostPeriod = keyof typeof COST_PERIODS;

const GROUPS: CostReport["by"][] = ["route", "key", "upstream"];

/** Cost totals over a period by route, key and upstream, and each key's use of its limits. */
export function createCosts(api: AdminApi, opts: { now: () => number }) {
  const period = signal<CostPeriod>("day");
  const reports = signal<CostReport[] | null>(null);
  const keys = signal<KeysView | null>(null);
  const error = signal<string | null>(null);
  const refresh = async () => {
    const since = opts.now() - COST_PERIODS[period.value].ms;
    try {
      const [costs, use] = await Promise.all([
        Promise.all(GROUPS.map((by) => api.costs({ by, since }))),
        api.keys(),
      ]);
      reports.value = costs;
      keys.value = use;
      error.value = null;
    } catch (err) {
      if (tooLarge(err)) reports.value = null;
      error.value = describeFailure(err);
    }
  };
  return {
    period,
    reports,
    keys,
    error,
    refresh,
    choose(next: CostPeriod) {
      period.value = next;
      return refresh();
    },
    clear() {
      reports.value = null;
      keys.value = null;
      error.value = null;
    },
  };
}

export type Costs = ReturnType<typeof createCosts>;
