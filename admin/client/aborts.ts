import { signal } from "@preact/signals";
import type { AbortFence, AbortResult } from "../api_types.ts";
import { type AdminApi, describeFailure } from "./api.ts";
import type { Fences } from "./fences_model.ts";

/** The fence an abort left, as its result line shows it with a Lift button. */
export interface ShownFence {
  id: string;
  kind: AbortFence["kind"];
  /** Epoch ms on the gateway's clock. */
  expiresAt: number;
  state: "in_force" | "lifting" | "lifted";
  /** Why the last Lift failed; null when none did. */
  error: string | null;
}

export interface AbortOutcome {
  ok: boolean;
  text: string;
  /** The panel whose button asked, which shows the result. */
  panel?: string;
  /** The fence the abort left; null when it left none (that kind is off); absent on failure. */
  fence?: ShownFence | null;
}

/** What an Abort button asked to stop, waiting for the operator to confirm. */
export interface AbortAsked {
  kind: "request" | "session";
  id: string;
  /** The panel whose button asked, which shows the confirmation ("live" unless told). */
  panel?: string;
}

export function shownFence(fence: AbortFence | null): ShownFence | null {
  return fence && {
    id: fence.id,
    kind: fence.kind,
    expiresAt: Date.parse(fence.expires_at),
    state: "in_force",
    error: null,
  };
}

/**
 * The abort buttons' calls (docs/design.md "Abort and disconnect"). A button only asks; the
 * confirmation names what will stop and what the fence the abort leaves will refuse, because
 * rows move as other requests finish and a click meant for one row could land on its neighbour.
 * The result of the latest one is kept for the page to show until dismissed, with its fence and
 * a Lift for it (docs/admin.md "Fences").
 */
export function createAborts(api: AdminApi, opts: { fences: Fences }) {
  const { fences } = opts;
  const result = signal<AbortOutcome | null>(null);
  const asked = signal<AbortAsked | null>(null);
  const run = async (
    what: string,
    opts: { call: () => Promise<AbortResult>; panel?: string },
  ) => {
    const { panel } = opts;
    try {
      const { requests, fence } = await opts.call();
      const count = requests.length === 1 ? "1 request" : `${requests.length} requests`;
      // A session abort fences a session with nothing running too.
      const stopped = requests.length === 0
        ? "nothing was running"
        : `${count} stopped (${requests.join(", ")})`;
      result.value = {
        ok: true,
        text: `Aborted ${what}: ${stopped}`,
        panel,
        fence: shownFence(fence),
      };
      // The list shows the new fence at once, not at the panel's next refresh.
      void fences.refresh();
    } catch (err) {
      result.value = {
        ok: false,
        text: `Could not abort ${what}: ${describeFailure(err)}`,
        panel,
      };
    }
  };
  /** Sets the shown fence's state, unless another abort's result replaced it meanwhile. */
  const update = (id: string, change: Partial<ShownFence>) => {
    const shown = result.peek();
    if (!shown?.fence || shown.fence.id !== id) return;
    result.value = { ...shown, fence: { ...shown.fence, ...change } };
  };
  return {
    result,
    asked,
    fences,
    ask(kind: AbortAsked["kind"], id: string, opts: { panel?: string } = {}) {
      asked.value = { kind, id, panel: opts.panel };
      // The confirmation says how long the fence lasts: under the config in force now.
      void fences.refresh();
    },
    cancel() {
      asked.value = null;
    },
    /** Stops what was asked; resolves once the result is known. */
    confirm(): Promise<void> {
      const what = asked.peek();
      asked.value = null;
      if (!what) return Promise.resolve();
      const call = what.kind === "request"
        ? () => api.abortRequest(what.id)
        : () => api.abortSession(what.id);
      return run(`${what.kind} ${what.id}`, { call, panel: what.panel });
    },
    /** Lifts the fence the shown result names; resolves once the gateway answered. */
    async lift(): Promise<void> {
      const fence = result.peek()?.fence;
      if (!fence || fence.state !== "in_force") return;
      update(fence.id, { state: "lifting", error: null });
      const why = await fences.lift(fence.id);
      update(fence.id, why === null ? { state: "lifted" } : { state: "in_force", error: why });
    },
    dismiss() {
      result.value = null;
    },
  };
}

export type Aborts = ReturnType<typeof createAborts>;
