import type { InValue, Value } from "@libsql/client";
import type { ReadRow as Row } from "./read_db.ts";

/**
 * Readers for result rows. They never throw: one odd value must not take down a whole history
 * page, so unexpected types read as null (or the type's zero for NOT NULL columns).
 */

function cell(row: Row, column: string): Value {
  return row[column] ?? null;
}

export function textOrNull(row: Row, column: string): string | null {
  const value = cell(row, column);
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "bigint") return String(value);
  return null;
}

export function text(row: Row, column: string): string {
  return textOrNull(row, column) ?? "";
}

export function numOrNull(row: Row, column: string): number | null {
  const value = cell(row, column);
  if (typeof value === "number") return value;
  if (typeof value === "bigint") return Number(value);
  if (typeof value === "string" && value.trim() !== "") {
    const parsed = Number(value);
    return Number.isFinite(parsed) ? parsed : null;
  }
  return null;
}

export function num(row: Row, column: string): number {
  return numOrNull(row, column) ?? 0;
}

export function flag(row: Row, column: string): boolean {
  return num(row, column) !== 0;
}

/** Reads a string union; `members` is a Record so the compiler checks it lists every member. */
export function memberOrNull<T extends string>(
  row: Row,
  opts: { column: string; members: Readonly<Record<T, true>> },
): T | null {
  const value = cell(row, opts.column);
  return typeof value === "string" && Object.hasOwn(opts.members, value) ? value as T : null;
}

/** Binds a number field: NaN, Infinity and anything not a number as NULL. */
export function bindNumber(value: number | null | undefined): InValue {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

/** Binds a boolean field as 0/1. */
export function bindFlag(value: boolean | null | undefined): InValue {
  return value ? 1 : 0;
}

/** Binds a record field: booleans as 0/1, and NaN, Infinity or undefined as NULL. */
export function bind(value: string | number | boolean | null | undefined): InValue {
  if (typeof value === "boolean") return value ? 1 : 0;
  if (typeof value === "number") return Number.isFinite(value) ? value : null;
  return value ?? null;
}
