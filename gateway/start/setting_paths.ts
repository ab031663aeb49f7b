import { localFilePath } from "../../db/local_path.ts";

/**
 * The paths the settings name, so `deno task start` can grant exactly these (docs/design.md "Settings": the config
 * file and the database are settings, so they may live anywhere on disk).
 */
export interface SettingPaths {
  read: string[];
  write: string[];
}

/** Always granted: the default database and config live there. */
const DATA_DIR = "data";

export function settingPaths(env: (name: string) => string | undefined): SettingPaths {
  const read = [DATA_DIR];
  const write = [DATA_DIR];
  const config = env("PULSEGATE_CONFIG");
  if (config) read.push(config);
  const dbFile = localFilePath(env("PULSEGATE_DB_URL") || "");
  if (dbFile !== null) {
    // libSQL writes -wal/-shm (and -journal) next to the file, and start creates the folder.
    const cut = Math.max(dbFile.lastIndexOf("/"), dbFile.lastIndexOf("\\"));
    const owned = cut > 0 ? [dbFile.slice(0, cut)] : cut === 0 ? ["/"] : withSiblings(dbFile);
    read.push(...owned);
    write.push(...owned);
  }
  return { read, write };
}

function withSiblings(file: string): string[] {
  return [file, `${file}-wal`, `${file}-shm`, `${file}-journal`];
}

/** One `--allow-*=` value. */
export function allowList(paths: string[]): string {
  return [...new Set(paths)].join(",");
}

/**
 * Deno splits `--allow-*=` lists on commas with no escape, so a path holding one cannot be
 * granted: say so in one line rather than grant a wrong path.
 */
export function ungrantable(env: (name: string) => string | undefined): string | null {
  for (const setting of ["PULSEGATE_CONFIG", "PULSEGATE_DB_URL"]) {
    const value = env(setting);
    const path = setting === "PULSEGATE_CONFIG" ? value : localFilePath(value || "");
    if (path?.includes(",")) {
      return `${setting}: cannot use ${path}: deno task start cannot grant a path with a comma; ` +
        "move it to a path without one";
    }
  }
  return null;
}

/**
 * The one line an operator sees when a path a setting names cannot be used: which setting,
 * which path, and what to do, instead of Deno's raw permission error or a stack trace.
 */
export class SettingPathError extends Error {
  constructor(setting: string, path: string, cause: unknown) {
    super(`${setting}: cannot use ${path}: ${reason(cause)}; ${fix(setting, cause)}`);
  }
}

/** Whether `err` is a file-system refusal worth a SettingPathError rather than a crash. */
export function isPathError(err: unknown): boolean {
  return err instanceof Deno.errors.NotFound || err instanceof Deno.errors.PermissionDenied ||
    err instanceof Deno.errors.NotCapable || err instanceof Deno.errors.IsADirectory ||
    err instanceof Deno.errors.NotADirectory || err instanceof Deno.errors.AlreadyExists ||
    isCantOpen(err);
}

function isCantOpen(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && code.startsWith("SQLITE_CANTOPEN");
}

function reason(err: unknown): string {
  if (err instanceof Deno.errors.NotFound) return "it does not exist";
  if (err instanceof Deno.errors.NotCapable) return "this process was not granted access to it";
  if (err instanceof Deno.errors.PermissionDenied) return "the operating system denied access";
  if (err instanceof Deno.errors.IsADirectory) return "it is a directory";
  // Creating the database's folder meets a file where a folder should be.
  if (err instanceof Deno.errors.NotADirectory || err instanceof Deno.errors.AlreadyExists) {
    return "a part of it is a file, not a folder";
  }
  return "the database file cannot be opened";
}

function fix(setting: string, err: unknown): string {
  if (err instanceof Deno.errors.NotCapable) {
    return "start with `deno task start`, which grants the paths PULSEGATE_CONFIG and " +
      "PULSEGATE_DB_URL name";
  }
  if (setting === "PULSEGATE_CONFIG") {
    return "set PULSEGATE_CONFIG to a readable JSON config file (or unset it for the demo)";
  }
  return "set PULSEGATE_DB_URL to file:<path> in a folder this user may create and write";
}
