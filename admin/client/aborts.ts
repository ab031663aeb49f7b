import { signal } from "@preact/signals";
import type { AbortResult } from "../api_types.ts";
import { type AdminApi, describeFailure } from "./api.ts";

export interface AbortOutcome {
  ok: boolean;
  text: string;
}

/** What an Abort button asked to stop, waiting for the operator to confirm. */
export interface AbortAsked {
  kind: "request" | "session";
  id: string;
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
  const run = async (what: string, call: () => Promise<AbortResult>) => {
    try {
      const { requests } = await call();
      const count = requests.length === 1 ? "1 request" : `${requests.length} requests`;
      result.value = {
        ok: true,
        text: `Aborted ${what}: ${count} stopped (${requests.join(", ")})`,
      };
    } catch (err) {
      result.value = { ok: false, text: `Could not abort ${what}: ${describeFailure(err)}` };
    }
  };
  return {
    result,
    asked,
    ask(kind: AbortAsked["kind"], id: string) {
      asked.value = { kind, id };
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
      return run(`${what.kind} ${what.id}`, call);
    },
    dismiss() {
      result.value = null;
    },
  };
}

export type Aborts = ReturnType<typeof createAborts>;
