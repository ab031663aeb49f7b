/**
 * What a config change changes, key path by key path (the paths config problems use: dotted,
 * array items by index), so a save or a rollback can be confirmed knowing what it does.
 */
export interface ConfigChangeLine {
  path: string;
  kind: "added" | "removed" | "changed";
  before?: unknown;
  after?: unknown;
}

export function diffConfig(
  before: unknown,
  after: unknown,
  opts: { path?: string } = {},
): ConfigChangeLine[] {
  const path = opts.path ?? "";
  if (same(before, after)) return [];
  if (isObject(before) && isObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
    return keys.flatMap((k) =>
      child(before[k], after[k], join(path, k), { has: [k in before, k in after] })
    );
  }
  if (Array.isArray(before) && Array.isArray(after)) {
    const length = Math.max(before.length, after.length);
    return Array.from({ length }, (_, i) => i).flatMap((i) =>
      child(before[i], after[i], join(path, String(i)), {
        has: [i < before.length, i < after.length],
      })
    );
  }
  return [{ path, kind: "changed", before, after }];
}

function child(
  before: unknown,
  after: unknown,
  path: string,
  opts: { has: [boolean, boolean] },
): ConfigChangeLine[] {
  const [was, is] = opts.has;
  if (was && !is) return [{ path, kind: "removed", before }];
  if (!was && is) return [{ path, kind: "added", after }];
  return diffConfig(before, after, { path });
}

function join(path: string, key: string): string {
  return path === "" ? key : `${path}.${key}`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** A value as one short line for the confirmation. */
export function showValue(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}…` : text;
}
