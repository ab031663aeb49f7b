import { isRecord } from "../../runtime/json.ts";

/**
 * Google's JSON mapping accepts every field both as lowerCamel (the SDKs) and
 * as snake_case (the REST samples), so a reader must look under both names.
 */
export function field(obj: Record<string, unknown>, camel: string): unknown {
  const value = obj[camel];
  return value !== undefined ? value : obj[snakeCase(camel)];
}

export function snakeCase(camel: string): string {
  return camel.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

export function camelCase(name: string): string {
  return name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** A value a reader would notice: not absent, empty, false or an empty list/object. */
export function hasSubstance(value: unknown): boolean {
  if (value === null || value === undefined || value === "" || value === false) return false;
  if (Array.isArray(value)) return value.length > 0;
  if (isRecord(value)) return Object.keys(value).length > 0;
  return true;
}

export function stringOf(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

export function numberOf(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}
