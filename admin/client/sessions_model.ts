import { signal } from "@preact/signals";
import type { SessionsView } from "../sessions_types.ts";
import { type AdminApi, describeFailure, tooLarge } from "./api.ts";

/** The Sessions panel's data as last read (docs/admin.md "Sessions"); a page timer refreshes it. */
export function createSessions(api: Pick<AdminApi, "sessions">) {
  const view = signal<SessionsView | null>(null);
  const error = signal<string | null>(null);
  return {
    view,
    error,
    async refresh() {
      try {
        view.value = await api.sessions();
        error.value = null;
      } catch (err) {
        if (tooLarge(err)) view.value = null;
        error.value = describeFailure(err);
      }
    },
    clear() {
      view.value = null;
      error.value = null;
    },
  };
}

export type Sessions = ReturnType<typeof createSessions>;

/** A cache hit rate as the page shows it: whole percent, "—" with no input recorded. */
export function formatHitRate(rate: number | null): string {
  return rate === null ? "—" : `${Math.round(rate * 100)}%`;
}
