/**
 * Turns zod's issues into problems an operator can act on: one per unknown key at the key's own
 * path, and plain-English messages instead of zod's defaults.
 */
import type { z } from "zod";
import { fieldNamesAt } from "./json_schema.ts";
import { type Config, ConfigSchema } from "./schema.ts";

export type ConfigProblem = { path: string; message: string; kind: "unknown_key" | "invalid" };
export type ConfigValidation =
  | { ok: true; config: Config }
  | { ok: false; problems: ConfigProblem[] };

type RawIssue = z.core.$ZodRawIssue;

export function validateConfig(raw: unknown): ConfigValidation {
  // Schema-level messages (ranges, patterns) take precedence over this per-parse map.
  const result = ConfigSchema.safeParse(raw, { error: humanMessage });
  if (result.success) return { ok: true, config: result.data };
  return { ok: false, problems: result.error.issues.flatMap(toProblems) };
}

/** One line per problem, for logs and the CLI. */
export function formatProblems(problems: readonly ConfigProblem[]): string {
  return problems.map((p) => `${p.path || "(config)"}: ${p.message}`).join("\n");
}

export function joinPath(path: readonly PropertyKey[]): string {
  return path.map(String).join(".");
}

function toProblems(issue: z.core.$ZodIssue): ConfigProblem[] {
  if (issue.code === "invalid_union" && issue.errors.length > 1) {
    return meantShape(issue.errors).flatMap((inner) =>
      toProblems({ ...inner, path: [...issue.path, ...inner.path] } as z.core.$ZodIssue)
    );
  }
  if (issue.code !== "unrecognized_keys") {
    return [{ path: joinPath(issue.path), message: issue.message, kind: "invalid" }];
  }
  const known = fieldNamesAt(issue.path);
  return issue.keys.map((key) => ({
    path: joinPath([...issue.path, key]),
    message: unknownFieldMessage(key, known),
    kind: "unknown_key",
  }));
}

/**
 * Of a union's shapes that all refused a value (a route entry: a candidate or a pool), the one the
 * operator meant: the one that finds the fewest of its fields unknown, the first on a tie. So a
 * pool with a bad member is told about that member, not that `pool` is no candidate field.
 */
function meantShape(branches: z.core.$ZodIssue[][]): z.core.$ZodIssue[] {
  const unknown = (issues: z.core.$ZodIssue[]) =>
    issues.reduce(
      (n, i) => n + (i.code === "unrecognized_keys" && !i.path.length ? i.keys.length : 0),
      0,
    );
  let best = branches[0] ?? [];
  for (const branch of branches) if (unknown(branch) < unknown(best)) best = branch;
  return best;
}

function unknownFieldMessage(key: string, known: readonly string[]): string {
  // Known to another shape a union allows here (another upstream kind; a pool's field beside a
  // candidate's): no suggestion then.
  if (known.includes(key)) return `unknown field "${key}" (it belongs to another kind of entry)`;
  const suggestion = closestName(key, known);
  const hint = suggestion === undefined ? "" : ` (did you mean "${suggestion}"?)`;
  return `unknown field "${key}"${hint}`;
}

function humanMessage(issue: RawIssue): string | undefined {
  switch (issue.code) {
    case "invalid_type":
      return issue.input === undefined ? "is required" : `must be ${typeName(issue.expected)}, ` +
        `not ${valueKind(issue.input)}`;
    case "too_small":
      return sizeMessage("at least", issue.origin, issue.minimum);
    case "too_big":
      return sizeMessage("at most", issue.origin, issue.maximum);
    case "invalid_value":
      return `must be one of ${issue.values.map(quote).join(", ")}`;
    case "invalid_union":
      return unionMessage(issue);
    case "invalid_format":
      return `must be a valid ${issue.format}`;
    case "unrecognized_keys":
      return `unknown field(s): ${issue.keys.map(quote).join(", ")}`;
    default:
      return undefined;
  }
}

function unionMessage(issue: Extract<RawIssue, { code: "invalid_union" }>): string {
  const options: unknown = "options" in issue ? issue.options : undefined;
  if (issue.discriminator === undefined || !Array.isArray(options)) {
    return "does not match any allowed shape";
  }
  const allowed = `one of ${options.map(quote).join(", ")}`;
  return discriminatorValue(issue.input, issue.discriminator) === undefined
    ? `is required: ${allowed}`
    : `must be ${allowed}`;
}

// zod hands over the whole object here, not the value of the discriminator field.
function discriminatorValue(input: unknown, field: string): unknown {
  if (typeof input !== "object" || input === null) return input;
  return (input as Record<string, unknown>)[field];
}

function sizeMessage(bound: string, origin: string, limit: number | bigint): string {
  if (origin === "array") return `must have ${bound} ${limit} item${limit === 1 ? "" : "s"}`;
  if (origin === "string") return `must have ${bound} ${limit} character${limit === 1 ? "" : "s"}`;
  return `must be ${bound} ${limit}`;
}

const TYPE_NAMES: Record<string, string> = {
  int: "a whole number",
  number: "a number",
  string: "a string",
  boolean: "true or false",
  object: "an object",
  array: "an array (a list in [ ])",
  null: "null",
};

function typeName(expected: string): string {
  return TYPE_NAMES[expected] ?? expected;
}

function valueKind(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string") return `the string ${JSON.stringify(value)}`;
  if (typeof value === "object") return "an object";
  return `${typeof value} ${String(value)}`;
}

function quote(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : String(value);
}

/** A near-miss field name, so `idle_timeout` points at `idle_timeout_secs`. */
function closestName(key: string, known: readonly string[]): string | undefined {
  const target = normalize(key);
  let best: { name: string; score: number } | undefined;
  for (const name of known) {
    const score = nameDistance(target, normalize(name));
    if (score <= 2 && (best === undefined || score < best.score)) best = { name, score };
  }
  return best?.name;
}

function normalize(name: string): string {
  return name.toLowerCase().replace(/[-_]/g, "");
}

function nameDistance(a: string, b: string): number {
  // A dropped or added suffix (`_secs`, `_env`) is the commonest slip: treat it as close.
  if (Math.min(a.length, b.length) >= 3 && (a.startsWith(b) || b.startsWith(a))) return 1;
  return editDistance(a, b);
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}
