import { signal } from "@preact/signals";
import type { ConfigProblem, ConfigView, RepairAction } from "../api_types.ts";
import type { ConfigVersionInfo } from "../config_versions_types.ts";
import { type AdminApi, ApiFailure, describeFailure } from "./api.ts";
import { type ConfigChangeLine, configChanges } from "./config_diff.ts";

export interface Notice {
  ok: boolean;
  text: string;
}

/** A change waiting for the operator's confirmation, with what it changes. */
export type PendingChange =
  | { kind: "save"; document: unknown; changes: ConfigChangeLine[] }
  | { kind: "rollback"; version: number; changes: ConfigChangeLine[] };

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
  const pending = signal<PendingChange | null>(null);
  const versions = signal<ConfigVersionInfo[]>([]);

  const parsed = (): { ok: true; value: unknown } | { ok: false } => {
    try {
      return { ok: true, value: JSON.parse(text.peek()) };
    } catch (err) {
      problems.value = [];
      notice.value = { ok: false, text: `Not valid JSON: ${(err as Error).message}` };
      return { ok: false };
    }
  };

  const loadVersions = async () => {
    try {
      versions.value = (await api.configVersions()).versions;
    } catch {
      versions.value = []; // the list is a convenience; the editor works without it
    }
  };

  const load = async () => {
    pending.value = null;
    try {
      const next = await api.config();
      view.value = next;
      text.value = next.config === null ? "" : JSON.stringify(next.config, null, 2);
    } catch (err) {
      notice.value = { ok: false, text: `Could not load the config: ${describeFailure(err)}` };
    }
    await loadVersions();
  };

  /** The config stored now, as the diffs compare against. */
  const stored = () => view.peek()?.source === "stored" ? view.peek()?.config : null;

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
    pending,
    versions,
    load,
    clear() {
      view.value = null;
      pending.value = null;
      versions.value = [];
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
    /** Checks the document first; a valid one is shown as a diff to confirm. */
    save: () =>
      busyWhile(async () => {
        const doc = parsed();
        if (!doc.ok) return;
        try {
          const checked = await api.checkConfig(doc.value);
          problems.value = checked.problems;
          if (!checked.ok) {
            const count = checked.problems.length;
            notice.value = {
              ok: false,
              text: `Not saved: the config has ${count} problem${count === 1 ? "" : "s"}.`,
            };
            return;
          }
        } catch (err) {
          refused(err, "Not saved");
          return;
        }
        const changes = configChanges(stored() ?? {}, doc.value);
        if (changes.length === 0) {
          notice.value = { ok: true, text: "Nothing to save: this is the stored config." };
          return;
        }
        notice.value = null;
        pending.value = { kind: "save", document: doc.value, changes };
      }),
    /** Fetches a kept version and shows what putting it back would change. */
    askRollback: (version: number) =>
      busyWhile(async () => {
        try {
          const kept = await api.configVersion(version);
          pending.value = {
            kind: "rollback",
            version,
            changes: configChanges(stored() ?? {}, kept.body),
          };
          notice.value = null;
        } catch (err) {
          notice.value = { ok: false, text: `Version ${version}: ${describeFailure(err)}` };
        }
      }),
    cancel() {
      pending.value = null;
    },
    confirm: () =>
      busyWhile(async () => {
        const change = pending.peek();
        if (!change) return;
        pending.value = null;
        try {
          if (change.kind === "save") await api.saveConfig(change.document);
          else await api.rollbackConfig(change.version);
          problems.value = [];
          notice.value = {
            ok: true,
            text: change.kind === "save"
              ? "Saved: the new config is in force."
              : `Rolled back to version ${change.version}: it is stored as the newest version and in force.`,
          };
          await load();
        } catch (err) {
          refused(err, change.kind === "save" ? "Not saved" : "Not rolled back");
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
