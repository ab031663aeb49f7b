import { signal } from "@preact/signals";
import type { AbortResult } from "../api_types.ts";
import { type AdminApi, describeFailure } from "./api.ts";

export interface AbortOutcome {
  ok: boolean;
  text: string;
  /** The panel whose button asked, which shows the result. */
  panel?: string;
}

/** What an Abort button asked to stop, waiting for the operator to confirm. */
export interface AbortAsked {
  kind: "request" | "session";
  id: string;
  /** The panel whose button asked, which shows the confirmation ("live" unless told). */
  panel?: string;
}

/**
 * The abort buttons' calls (docs/design.md "Abort and disconnect"). A button only asks; the
 * confirmation names what will stop, because rows move as other requests finish and a click
 * meant for one row could land on its neighbour. The result of the latest one is kept for the
 * page to show until dismissed.
 */
export function createAborts(api: AdminApi) {
  const result = signal<AbortOutcome | null>(null);
  const asked = signal<AbortAsked | null>(null);
  const run = async (
    what: string,
    opts: { call: () => Promise<AbortResult>; panel?: string },
  ) => {
    const { panel } = opts;
    try {
      const { requests } = await opts.call();
      const count = requests.length === 1 ? "1 request" : `${requests.length} requests`;
      result.value = {
        ok: true,
        text: `Aborted ${what}: ${count} stopped (${requests.join(", ")})`,
        panel,
      };
    } catch (err) {
      result.value = {
        ok: false,
        text: `Could not abort ${what}: ${describeFailure(err)}`,
        panel,
      };
    }
  };
  return {
    result,
    asked,
    ask(kind: AbortAsked["kind"], id: string, opts: { panel?: string } = {}) {
      asked.value = { kind, id, panel: opts.panel };
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
    dismiss() {
      result.value = null;
    },
  };
}

export type Aborts = ReturnType<typeof createAborts>;
