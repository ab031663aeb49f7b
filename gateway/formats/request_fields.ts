import { clientError } from "../runtime/gateway_error.ts";
import type { IrPart } from "./ir.ts";
import { isRecord } from "../runtime/json.ts";

/**
 * Small readers for client bodies. Each names the offending field, so a bad
 * request gets a 400 that says exactly what to fix.
 */
export function requireRecord(value: unknown, param: string): Record<string, unknown> {
  if (!isRecord(value)) throw clientError(`'${param}' must be an object`, { param });
  return value;
}

export function requireArray(value: unknown, param: string): unknown[] {
  if (!Array.isArray(value)) throw clientError(`'${param}' must be an array`, { param });
  return value;
}

export function requireString(value: unknown, param: string): string {
  if (typeof value !== "string") throw clientError(`'${param}' must be a string`, { param });
  return value;
}

export function optionalString(value: unknown, param: string): string | undefined {
  return value === undefined || value === null ? undefined : requireString(value, param);
}

export function optionalNumber(value: unknown, param: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw clientError(`'${param}' must be a number`, { param });
  }
  return value;
}

export function optionalBoolean(value: unknown, param: string): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "boolean") throw clientError(`'${param}' must be a boolean`, { param });
  return value;
}

export function optionalStringList(value: unknown, param: string): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === "string") return [value];
  return requireArray(value, param).map((s, i) => requireString(s, `${param}[${i}]`));
}

/** Splits a `data:` URL into an inline image part; other URLs stay URLs. */
export function imageFromUrl(url: string): IrPart {
  const match = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  if (match) return { type: "image", mediaType: match[1] ?? "", data: match[2] ?? "" };
  return { type: "image_url", url };
}
