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

/**
 * What a save or rollback changes: every key path (`diffConfig`), and for each pool whose
 * members, weights or pick change, the traffic shares its weights give before and after, so a
 * weight of 3 reads as "75 %" (docs/admin.md "Config").
 */
export function configChanges(before: unknown, after: unknown): ConfigChangeLine[] {
  const lines = diffConfig(before, after);
  if (lines.length === 0) return lines;
  const was = poolShares(before);
  const is = poolShares(after);
  for (const path of new Set([...was.keys(), ...is.keys()])) {
    const [b, a] = [was.get(path), is.get(path)];
    if (b === a) continue;
    const at = `${path}.pool (shares)`;
    if (b === undefined) lines.push({ path: at, kind: "added", after: a });
    else if (a === undefined) lines.push({ path: at, kind: "removed", before: b });
    else lines.push({ path: at, kind: "changed", before: b, after: a });
  }
  return lines;
}

/** Each pool of a config document by its path, as its members' shares: "a 75 %, b 25 %". */
function poolShares(doc: unknown): Map<string, string> {
  const shares = new Map<string, string>();
  const routes = isObject(doc) && Array.isArray(doc.routes) ? doc.routes : [];
  routes.forEach((route, r) => {
    const entries = isObject(route) && Array.isArray(route.candidates) ? route.candidates : [];
    entries.forEach((entry, c) => {
      if (!isObject(entry) || !Array.isArray(entry.pool)) return;
      const members = entry.pool.filter(isObject);
      const weight = (m: Record<string, unknown>) =>
        typeof m.weight === "number" && m.weight > 0 ? m.weight : 1;
      const total = members.reduce((sum, m) => sum + weight(m), 0);
      const ups = members.map((m) => String(m.upstream));
      const named = members.map((m, i) =>
        ups.indexOf(ups[i]!) === ups.lastIndexOf(ups[i]!) ? ups[i] : `${ups[i]}/${String(m.model)}`
      );
      const split = members.map((m, i) => `${named[i]} ${Math.round(weight(m) / total * 100)} %`)
        .join(", ");
      const pick = typeof entry.pick === "string" ? entry.pick : "weighted";
      // Another pick weighs only the members it finds equal: the shares say how those split.
      shares.set(
        `routes.${r}.candidates.${c}`,
        pick === "weighted" ? split : `${pick}; equals split ${split}`,
      );
    });
  });
  return shares;
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
