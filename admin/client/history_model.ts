import { signal } from "@preact/signals";
import type { HistoryCursor, HistoryPage, RequestDetail } from "../api_types.ts";
import { type AdminApi, describeFailure, type HistoryFilters, tooLarge } from "./api.ts";

/**
 * History with filters and keyset pages. `Older` follows the page's cursor; the cursors of the
 * pages already seen are kept, so `Newer` goes back without offsets.
 */
export function createHistory(api: AdminApi) {
  const filters = signal<HistoryFilters>({});
  const page = signal<HistoryPage | null>(null);
  const error = signal<string | null>(null);
  const loading = signal(false);
  const detail = signal<RequestDetail | null>(null);
  const detailError = signal<string | null>(null);
  // The cursor each page seen so far was loaded with; the last one is the page shown.
  const trail = signal<(HistoryCursor | undefined)[]>([undefined]);

  const load = async (before: HistoryCursor | undefined) => {
    loading.value = true;
    try {
      page.value = await api.history(filters.peek(), { before });
      error.value = null;
    } catch (err) {
      if (tooLarge(err)) page.value = null;
      error.value = describeFailure(err);
    } finally {
      loading.value = false;
    }
  };

  return {
    filters,
    page,
    error,
    loading,
    detail,
    detailError,
    trail,
    /** A new search starts at the newest page. */
    search(next: HistoryFilters) {
      filters.value = next;
      trail.value = [undefined];
      return load(undefined);
    },
    refresh() {
      return load(trail.peek().at(-1));
    },
    older() {
      const next = page.peek()?.next;
      if (!next) return Promise.resolve();
      trail.value = [...trail.peek(), next];
      return load(next);
    },
    newer() {
      const seen = trail.peek();
      if (seen.length <= 1) return Promise.resolve();
      const back = seen.slice(0, -1);
      trail.value = back;
      return load(back.at(-1));
    },
    async open(id: string) {
      try {
        detail.value = await api.request(id);
        detailError.value = null;
      } catch (err) {
        detail.value = null;
        detailError.value = `Request ${id}: ${describeFailure(err)}`;
      }
    },
    close() {
      detail.value = null;
      detailError.value = null;
    },
  };
}

export type History = ReturnType<typeof createHistory>;
