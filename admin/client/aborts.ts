import { signal } from "@preact/signals";
import type { AbortResult } from "../api_types.ts";
import { type AdminApi, describeFailure } from "./api.ts";

export interface AbortOutcome {
  ok: boolean;
  text: string;
}

/** The abort buttons' calls (docs/design.md "Abort and disconnect") and the result of the latest one, shown under the list. */
export function createAborts(api: AdminApi) {
  const result = signal<AbortOutcome | null>(null);
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
    abortRequest: (id: string) => run(`request ${id}`, () => api.abortRequest(id)),
    abortSession: (id: string) => run(`session ${id}`, () => api.abortSession(id)),
  };
}

export type Aborts = ReturnType<typeof createAborts>;
