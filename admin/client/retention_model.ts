import { signal } from "@preact/signals";
import type { RetentionView } from "../retention_types.ts";
import { type AdminApi, describeFailure } from "./api.ts";

/** What history keeps and from when, shown on the History panel (docs/admin.md "History"). */
export function createRetention(api: Pick<AdminApi, "retention">) {
  const view = signal<RetentionView | null>(null);
  const error = signal<string | null>(null);
  return {
    view,
    error,
    async refresh() {
      try {
        view.value = await api.retention();
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

export type Retention = ReturnType<typeof createRetention>;

const MIB = 1024 * 1024;

/** A size as the page shows it: MiB below a GiB, GiB above. */
export function formatBytes(bytes: number): string {
  if (bytes >= 1024 * MIB) return `${(bytes / (1024 * MIB)).toFixed(1)} GiB`;
  return `${(bytes / MIB).toFixed(bytes < 10 * MIB ? 1 : 0)} MiB`;
}
