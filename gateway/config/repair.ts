/**
 * Safe-mode repairs (docs/design.md "Config"): when the stored config fails validation, offer the smallest edits
 * that make it load again. Only edits with an obvious right answer are offered: drop a field the
 * schema does not know, or put an out-of-range number back to its documented default. Anything
 * that could change who may call what (keys, routes, URLs, flags) is left to the operator.
 */
import { isRecord } from "../runtime/json.ts";
import { schemaNodesAt } from "./json_schema.ts";
import { type ConfigProblem, validateConfig } from "./validate.ts";

export type RepairAction =
  | { op: "delete"; path: string; reason: string }
  | { op: "reset"; path: string; reason: string; value: number };

export type RepairProposal = { repaired: unknown; actions: RepairAction[] };

type Segments = (string | number)[];
type Container = Record<string, unknown> | unknown[];

// Refinements only run once the shape is valid, so a repair can uncover one more problem.
const MAX_ROUNDS = 3;

/**
 * Actions that turn `raw` into a config that validates, or null when it is already valid or no
 * such repair exists. A proposal is always re-validated before it is offered.
 */
export function proposeRepair(raw: unknown): RepairProposal | null {
  let current = raw;
  const actions: RepairAction[] = [];
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const checked = validateConfig(current);
    if (checked.ok) return actions.length === 0 ? null : { repaired: current, actions };
    const next = fixesFor(current, checked.problems, actions);
    if (next.length === 0) return null;
    current = applyRepair(current, next);
    actions.push(...next);
  }
  return null;
}

/** Applies chosen actions to a deep copy; actions whose path no longer exists are skipped. */
export function applyRepair(raw: unknown, actions: readonly RepairAction[]): unknown {
  const copy: unknown = structuredClone(raw);
  for (const action of actions) {
    const segments = resolvePath(copy, action.path);
    if (segments !== null) applyAction(copy, { action, segments });
  }
  return copy;
}

function fixesFor(raw: unknown, problems: ConfigProblem[], done: RepairAction[]): RepairAction[] {
  const touched = new Set(done.map((action) => action.path));
  const fixes: RepairAction[] = [];
  for (const problem of problems) {
    if (touched.has(problem.path)) return []; // our own fix did not hold: give up
    const fix = fixFor(raw, problem);
    if (fix === null) return [];
    touched.add(problem.path);
    fixes.push(fix);
  }
  return fixes;
}

function fixFor(raw: unknown, problem: ConfigProblem): RepairAction | null {
  const segments = resolvePath(raw, problem.path);
  if (segments === null || typeof segments.at(-1) !== "string") return null;
  if (problem.kind === "unknown_key") {
    return { op: "delete", path: problem.path, reason: "unknown field" };
  }
  const value = numericDefault(segments);
  if (value === undefined) return null;
  return {
    op: "reset",
    path: problem.path,
    reason: `${problem.message}; default is ${value}`,
    value,
  };
}

function numericDefault(segments: Segments): number | undefined {
  const defaults = new Set(schemaNodesAt(segments).map((node) => node.default));
  const [value] = defaults;
  return defaults.size === 1 && typeof value === "number" ? value : undefined;
}

function applyAction(root: unknown, opts: { action: RepairAction; segments: Segments }) {
  const parent = valueAt(root, opts.segments.slice(0, -1));
  const key = opts.segments.at(-1);
  if (!isRecord(parent) || typeof key !== "string") return;
  if (opts.action.op === "delete") delete parent[key];
  else parent[key] = opts.action.value;
}

function valueAt(root: unknown, segments: Segments): unknown {
  let node = root;
  for (const segment of segments) {
    if (!isContainer(node)) return undefined;
    node = Array.isArray(node) ? node[Number(segment)] : node[String(segment)];
  }
  return node;
}

/**
 * Maps a dotted problem path back onto the value. Unknown keys may themselves contain dots
 * (`"a.b"`), so at each object the longest existing key wins.
 */
export function resolvePath(root: unknown, path: string): Segments | null {
  if (path === "") return [];
  const parts = path.split(".");
  const segments: Segments = [];
  let node = root;
  while (parts.length > 0) {
    const segment = takeSegment(node, parts);
    if (segment === null) return null;
    segments.push(segment);
    node = valueAt(node, [segment]);
  }
  return segments;
}

/** Removes and returns the leading segment of `parts` that exists in `node`. */
function takeSegment(node: unknown, parts: string[]): string | number | null {
  if (Array.isArray(node)) return arrayIndex(node, parts.shift());
  if (!isRecord(node)) return null;
  for (let length = parts.length; length >= 1; length--) {
    const key = parts.slice(0, length).join(".");
    if (Object.hasOwn(node, key)) {
      parts.splice(0, length);
      return key;
    }
  }
  return null;
}

function arrayIndex(list: unknown[], part: string | undefined): number | null {
  if (part === undefined || !/^\d+$/.test(part)) return null;
  const index = Number(part);
  return index < list.length ? index : null;
}

function isContainer(value: unknown): value is Container {
  return typeof value === "object" && value !== null;
}
