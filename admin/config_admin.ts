/**
 * The config as the admin page edits it (docs/design.md "Config"): read the stored document, validate and store
 * a new one, and repair a stored config that put the gateway in safe mode. Whatever is stored
 * here takes effect at once for new requests; requests already running keep the config they
 * started with.
 */
import { z } from "zod";
import type { Db } from "../db/client.ts";
import type { Reads } from "../db/read_db.ts";
import { loadStoredConfig, storeConfig } from "../db/config_store.ts";
import { applyRepair, proposeRepair, type RepairAction } from "../gateway/config/repair.ts";
import type { Config } from "../gateway/config/schema.ts";
import { type ConfigProblem, validateConfig } from "../gateway/config/validate.ts";
import type { Logger } from "../gateway/runtime/logger.ts";
import type { RunState } from "../gateway/policy/run_state.ts";
import type { ConfigSaved, ConfigView, SafeModeView } from "./api_types.ts";
import { mergePatch } from "./merge_patch.ts";

export interface ConfigAdminDeps {
  db: Db;
  /** Where the version list is read; default `db` (docs/scaling.md "Admin reads"). */
  reads?: Reads;
  state: RunState;
  demo: boolean;
  now: () => number;
  log?: Logger;
}

export type ConfigChange =
  | { ok: true; saved: ConfigSaved }
  | { ok: false; status: 400 | 409; code: string; message: string; problems: ConfigProblem[] };

export async function configView(deps: ConfigAdminDeps): Promise<ConfigView> {
  const stored = await loadStoredConfig(deps.db);
  const safeMode = deps.state.config === null && deps.state.safeModeReason !== null
    ? safeModeView(stored?.body, deps.state.safeModeReason)
    : null;
  if (stored) {
    return {
      config: stored.body,
      source: "stored",
      updatedAt: stored.updatedAt,
      version: stored.version,
      runningVersion: deps.state.configVersion,
      demo: deps.demo,
      safeMode,
    };
  }
  const running = deps.state.config;
  return {
    config: running,
    source: running && deps.demo ? "demo" : "none",
    updatedAt: null,
    version: null,
    runningVersion: deps.state.configVersion,
    demo: deps.demo,
    safeMode,
  };
}

function safeModeView(body: unknown, reason: string): SafeModeView {
  const checked = validateConfig(body);
  return {
    reason,
    problems: checked.ok ? [] : checked.problems,
    repair: proposeRepair(body)?.actions ?? null,
  };
}

/** Validates the whole document; stores and applies it only when it is valid. */
export async function saveConfig(
  deps: ConfigAdminDeps,
  raw: unknown,
  opts: { restoredFrom?: number } = {},
): Promise<ConfigChange> {
  const checked = validateConfig(raw);
  if (!checked.ok) return invalid(checked.problems, { status: 400 });
  await apply(deps, { raw, config: checked.config, why: "saved", ...opts });
  return { ok: true, saved: { ok: true, config: raw, applied: [] } };
}

/** The document a change starts from: the stored one, else the config in force (the demo's). */
export async function editedDocument(deps: ConfigAdminDeps): Promise<unknown> {
  return (await loadStoredConfig(deps.db))?.body ?? deps.state.config ?? {};
}

/** A partial update: merged into the stored document (RFC 7396), then validated as a whole. */
export async function patchConfig(deps: ConfigAdminDeps, patch: unknown): Promise<ConfigChange> {
  return saveConfig(deps, mergePatch(await editedDocument(deps), patch));
}

const RepairActionSchema = z.discriminatedUnion("op", [
  z.object({ op: z.literal("delete"), path: z.string(), reason: z.string() }).strict(),
  z.object({ op: z.literal("reset"), path: z.string(), reason: z.string(), value: z.number() })
    .strict(),
]);

export const RepairRequestSchema = z.object({
  /** The actions the operator was shown; omitted means the repair proposed now. */
  actions: z.array(RepairActionSchema).optional(),
}).strict();

/**
 * Safe-mode repair: applies the actions to the stored document, re-validates the result, and
 * stores and applies it. Refused (409) when nothing is stored or the result is still invalid.
 */
export async function repairConfig(
  deps: ConfigAdminDeps,
  request: z.infer<typeof RepairRequestSchema>,
): Promise<ConfigChange> {
  const stored = await loadStoredConfig(deps.db);
  if (!stored) {
    return {
      ok: false,
      status: 409,
      code: "config.nothing_stored",
      message: "no config is stored, so there is nothing to repair",
      problems: [],
    };
  }
  const actions: RepairAction[] = request.actions ?? proposeRepair(stored.body)?.actions ?? [];
  if (actions.length === 0) return noRepair(stored.body);
  const repaired = applyRepair(stored.body, actions);
  const checked = validateConfig(repaired);
  if (!checked.ok) return invalid(checked.problems, { status: 409 });
  await apply(deps, { raw: repaired, config: checked.config, why: "repaired" });
  return { ok: true, saved: { ok: true, config: repaired, applied: actions } };
}

function noRepair(body: unknown): ConfigChange {
  const checked = validateConfig(body);
  if (!checked.ok) return invalid(checked.problems, { status: 409 });
  return {
    ok: false,
    status: 409,
    code: "config.nothing_to_repair",
    message: "the stored config is valid: there is nothing to repair",
    problems: [],
  };
}

function invalid(problems: ConfigProblem[], opts: { status: 400 | 409 }): ConfigChange {
  const count = problems.length === 1 ? "1 problem" : `${problems.length} problems`;
  return {
    ok: false,
    status: opts.status,
    code: "config.invalid",
    message: `the config has ${count}`,
    problems,
  };
}

async function apply(
  deps: ConfigAdminDeps,
  change: { raw: unknown; config: Config; why: "saved" | "repaired"; restoredFrom?: number },
): Promise<void> {
  // Stored first: if the database refuses, the running config stays what the database says.
  deps.state.configVersion = await storeConfig(deps.db, change.raw, {
    now: deps.now(),
    by: change.why === "repaired" ? "repair" : "admin",
    restoredFrom: change.restoredFrom,
  });
  deps.state.config = change.config;
  deps.state.safeModeReason = null;
  deps.log?.event(`config.${change.why}`, {
    upstreams: change.config.upstreams.length,
    routes: change.config.routes.length,
  });
}
