import { signal } from "@preact/signals";
import type { ConfigProblem, ConfigView, RepairAction } from "../api_types.ts";
import { type AdminApi, ApiFailure, describeFailure } from "./api.ts";

export interface Notice {
  ok: boolean;
  text: string;
}

/**
 * The config editor and safe mode: the stored document as editable text, the problems of the
 * last check or save (each at its key path), and the repair. Saves send the whole document; the
 * gateway validates it and stores it only when it is valid.
 */
export function createConfigModel(api: AdminApi) {
  const view = signal<ConfigView | null>(null);
  const text = signal("");
  const problems = signal<ConfigProblem[]>([]);
  const notice = signal<Notice | null>(null);
  /** The outcome of the safe-mode repair, shown where the repair was offered. */
  const repairNotice = signal<Notice | null>(null);
  const busy = signal(false);

  const parsed = (): { ok: true; value: unknown } | { ok: false } => {
    try {
      return { ok: true, value: JSON.parse(text.peek()) };
    } catch (err) {
      problems.value = [];
      notice.value = { ok: false, text: `Not valid JSON: ${(err as Error).message}` };
      return { ok: false };
    }
  };

  const load = async () => {
    try {
      const next = await api.config();
      view.value = next;
      text.value = next.config === null ? "" : JSON.stringify(next.config, null, 2);
    } catch (err) {
      notice.value = { ok: false, text: `Could not load the config: ${describeFailure(err)}` };
    }
  };

  const busyWhile = async (work: () => Promise<void>) => {
    busy.value = true;
    try {
      await work();
    } finally {
      busy.value = false;
    }
  };

  const refused = (err: unknown, what: string) => {
    problems.value = err instanceof ApiFailure ? err.detail.problems : [];
    notice.value = { ok: false, text: `${what}: ${describeFailure(err)}` };
  };

  return {
    view,
    text,
    problems,
    notice,
    repairNotice,
    busy,
    load,
    clear() {
      view.value = null;
      text.value = "";
      problems.value = [];
      notice.value = null;
      repairNotice.value = null;
    },
    check: () =>
      busyWhile(async () => {
        const doc = parsed();
        if (!doc.ok) return;
        try {
          const checked = await api.checkConfig(doc.value);
          problems.value = checked.problems;
          notice.value = checked.ok
            ? { ok: true, text: "Valid: nothing saved yet." }
            : { ok: false, text: `Not valid: ${checked.problems.length} problem(s).` };
        } catch (err) {
          refused(err, "Check failed");
        }
      }),
    save: () =>
      busyWhile(async () => {
        const doc = parsed();
        if (!doc.ok) return;
        try {
          await api.saveConfig(doc.value);
          problems.value = [];
          notice.value = { ok: true, text: "Saved: the new config is in force." };
          await load();
        } catch (err) {
          refused(err, "Not saved");
        }
      }),
    repair: (actions: RepairAction[]) =>
      busyWhile(async () => {
        try {
          const saved = await api.repairConfig(actions);
          problems.value = [];
          const changed = saved.applied.map((a) => a.path).join(", ");
          repairNotice.value = {
            ok: true,
            text: `Repaired (${changed}): the config is stored and proxying has resumed.`,
          };
          await load();
        } catch (err) {
          repairNotice.value = { ok: false, text: `Repair failed: ${describeFailure(err)}` };
          problems.value = err instanceof ApiFailure ? err.detail.problems : [];
        }
      }),
  };
}

export type ConfigModel = ReturnType<typeof createConfigModel>;
