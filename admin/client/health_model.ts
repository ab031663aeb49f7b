import { signal } from "@preact/signals";
import type { HealthView } from "../api_types.ts";
import { type AdminApi, describeFailure, type UpstreamAction } from "./api.ts";

const DONE: Record<UpstreamAction, string> = {
  resume: "resumed: it is tried again at once",
  enable: "enabled",
  disable: "disabled: no route sends to it",
};

/** Upstream health as last read; refreshed by a timer the page owns. */
export function createHealth(api: AdminApi) {
  const view = signal<HealthView | null>(null);
  const error = signal<string | null>(null);
  /** What the last control did, or why it failed; the operator may dismiss it. */
  const result = signal<{ ok: boolean; text: string } | null>(null);
  const refresh = async () => {
    try {
      view.value = await api.health();
      error.value = null;
    } catch (err) {
      error.value = describeFailure(err);
    }
  };
  return {
    view,
    error,
    result,
    refresh,
    async control(id: string, action: UpstreamAction) {
      try {
        await api.controlUpstream(id, action);
        result.value = { ok: true, text: `Upstream ${id} ${DONE[action]}.` };
      } catch (err) {
        result.value = { ok: false, text: `Upstream ${id}: ${describeFailure(err)}` };
      }
      await refresh();
    },
    dismiss() {
      result.value = null;
    },
    clear() {
      view.value = null;
      error.value = null;
      result.value = null;
    },
  };
}

export type Health = ReturnType<typeof createHealth>;
