import { signal } from "@preact/signals";
import type { TrendsView, TrendWindow } from "../trends_types.ts";
import { describeFailure, tooLarge } from "./api.ts";

export interface TrendFilters {
  window: TrendWindow;
  route: string;
  upstream: string;
}

/** The trends panel: the chosen window and filters, and the buckets last read for them. */
export function createTrends(load: (filters: TrendFilters) => Promise<TrendsView>) {
  const filters = signal<TrendFilters>({ window: "15m", route: "", upstream: "" });
  const view = signal<TrendsView | null>(null);
  const error = signal<string | null>(null);
  const refresh = async () => {
    try {
      view.value = await load(filters.peek());
      error.value = null;
    } catch (err) {
      if (tooLarge(err)) view.value = null;
      error.value = describeFailure(err);
    }
  };
  return {
    filters,
    view,
    error,
    refresh,
    choose(next: Partial<TrendFilters>) {
      filters.value = { ...filters.peek(), ...next };
      return refresh();
    },
    clear() {
      view.value = null;
      error.value = null;
    },
  };
}

export type Trends = ReturnType<typeof createTrends>;

/** Per-second rates from per-bucket counts. */
export function perSecond(count: number, bucketMs: number): number {
  return count / (bucketMs / 1000);
}
