import { signal } from "@preact/signals";
import type { HealthView } from "../api_types.ts";
import { type AdminApi, describeFailure } from "./api.ts";

/** Upstream health as last read; refreshed by a timer the page owns. */
export function createHealth(api: AdminApi) {
  const view = signal<HealthView | null>(null);
  const error = signal<string | null>(null);
  return {
    view,
    error,
    async refresh() {
      try {
        view.value = await api.health();
        error.value = null;
      } catch (err) {
        error.value = describeFailure(err);
      }
    },
    clear() {
      view.value = null;
      error.value = null;
    },
  };
}

export type Health = ReturnType<typeof createHealth>;
