/**
 * Renders docs/config.md from the JSON Schema, so the reference table cannot drift from the code
 * (tests/config_doc_test.ts fails when the committed file differs from this output).
 */
import {
  alternatives,
  configJsonSchema,
  isSchemaObject,
  type JsonSchema,
} from "../gateway/config/json_schema.ts";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { z } from "zod";
import { GuardrailsSchema } from "../gateway/policy/guardrails.ts";

/** Matches deno.json's fmt.lineWidth, so `deno fmt --check` accepts the generated file. */
const LINE_WIDTH = 100;

export const EXAMPLE_CONFIG: ConfigInput = {
  failover: {
    idle_timeout_secs: 300,
    slot_wait_secs: 30,
    failures_to_pause: 3,
    pause_secs: 60,
    max_pause_secs: 600,
    retries_per_candidate: 1,
    whole_answer_deadline: null,
    timeout_status: 504,
  },
  upstreams: [
    {
      id: "openai",
      kind: "openai-chat",
      base_url: "https://api.openai.com/v1",
      api_key_env: "OPENAI_API_KEY",
      max_in_flight: 64,
      prices: { "gpt-5": { input: 1.25, output: 10, cached_input: 0.125 } },
    },
    {
      id: "openai-b",
      kind: "openai-chat",
      api_key_env: "OPENAI_API_KEY_B",
      prices: { "gpt-5": { input: 1.25, output: 10, cached_input: 0.125 } },
    },
    {
      id: "claude",
      kind: "anthropic",
      base_url: "https://api.anthropic.com",
      api_key_env: "ANTHROPIC_API_KEY",
    },
    { id: "gemini", kind: "gemini", api_key_env: "GEMINI_API_KEY" },
    {
      id: "bedrock",
      kind: "bedrock",
      region: "us-east-1",
      access_key_env: "AWS_ACCESS_KEY_ID",
      secret_key_env: "AWS_SECRET_ACCESS_KEY",
    },
  ],
  routes: [{
    model: "smart",
    candidates: [
      { upstream: "claude", model: "claude-sonnet-4-5" },
      { upstream: "openai", model: "gpt-5" },
    ],
  }, {
    model: "spread",
    candidates: [
      {
        pick: "weighted",
        pool: [
          { upstream: "openai", model: "gpt-5", weight: 3 },
          { upstream: "openai-b", model: "gpt-5", weight: 1 },
        ],
      },
      { upstream: "claude", model: "claude-sonnet-4-5" },
    ],
  }],
  keys: [{
    id: "app1",
    key_env: "PULSEGATE_KEY_APP1",
    routes: ["smart"],
    rpm: 600,
    budget: { usd: 50, period: "day" },
  }],
};

const PRICES_AND_LIMITS = [
  "An upstream's `prices` give each attempt a cost in USD when it ends, from the tokens it " +
  "billed, all per million tokens and keyed by the model name the candidate sends: input at " +
  "`input`, the input read from the provider's prompt cache at `cached_input`, the input written " +
  "to it at `cache_write` (`cache_write_1h` for a one-hour cache), output (reasoning included) at " +
  "`output`. A cache price the config leaves out follows the provider's rule: for Claude (an " +
  "`anthropic` upstream, or a Claude model on `bedrock`) a read is 0.1 x input, a write 1.25 x " +
  "input and a one-hour write 2 x input; for every other upstream the input price, which never " +
  'bills less than the provider (docs/observability.md "Cache tokens" has the table per kind). A ' +
  "request costs the sum of its attempts, so a request that failed over pays for every hop that " +
  "billed. The cost is in history (`cost_usd`, and `cache_write_usd` for the writes, on requests " +
  "and attempts), in `pulsegate_cost_total{route,upstream}` and on the admin page; a model " +
  "without a price records no cost (null), not zero.",
  "A key's `rpm` counts the requests it was admitted for in the last 60 seconds; its `tpm` " +
  "counts the tokens its finished attempts billed (input + output, as the upstream reported " +
  "them) in the last 60 seconds, so a request is admitted while that sum is under `tpm` and may " +
  "itself take it over. `budget` caps the key's cost in the current UTC day or calendar month. " +
  "A request over any of them is answered 429 in the client's own format with `Retry-After` " +
  "(seconds until the window frees, or until the budget's period ends) and code " +
  "`gw.key.rate_limited` or `gw.key.budget_exhausted`; it is recorded and no upstream is called. " +
  "The check runs after auth and the content type and before the body is read (so a request " +
  "with a bad body or an unknown model still counts towards `rpm`); token counting " +
  "(`/v1/messages/count_tokens`) bills nothing and is neither limited nor counted. The counters " +
  "live in the database, so instances sharing one share the limits, within about a second " +
  "(docs/scaling.md).",
  "A key's `max_in_flight` caps its requests in progress at once in one gateway process: a " +
  "place is taken before the body is read and given back when the request's row closes " +
  "(a stream holds it until it ends or its client leaves; an embeddings answer, whose vectors " +
  "the gateway holds until they are sent, until its client has read it or left). One more is " +
  "answered 429 " +
  "`gw.key.max_in_flight` with a `Retry-After` of 1 s, recorded, before its body is read and " +
  "without counting towards `rpm`. `pulsegate_key_in_flight_requests{key}` shows each key's " +
  'count (docs/security.md "Request bodies and per-key concurrency").',
];

const SESSION_LIMITS = [
  "A key's `session_budget` caps each of its sessions (a coding agent's conversation: the " +
  "session its client names, or the one derived from its prompt, docs/observability.md " +
  '"Cache-aware affinity"): its `requests` (each one admitted counts), billed `tokens` (input + ' +
  "output) and `usd`. Once a session reaches a cap, its next requests are answered 429 " +
  "`gw.session.budget_exhausted` in the client's own format, recorded, with no upstream called. " +
  "A session's budget does not renew: the answer carries no `Retry-After` but " +
  "`x-should-retry: false`, which the OpenAI and Anthropic SDKs obey; a new session starts from " +
  "zero. Requests with no session (a lone question) are not under it.",
  "`loop_breaker: {repeats, window_secs}` (opt-in) refuses a runaway agent: a request whose body " +
  "is byte for byte one the same session sent `repeats - 1` times already in the last " +
  "`window_secs` is answered 429 `gw.session.loop_detected` with `Retry-After` (seconds until " +
  "the oldest copy leaves the window) and `x-should-retry: false`. Only admitted copies count, " +
  "and a different body (an agent making progress) always passes.",
  "Both are checked once the body is read (the session may be named in it), after the key's own " +
  "limits and before guardrails. They count in the gateway process: a session's first request " +
  "in a process reads what history holds of it, so a budget holds across a restart; after that " +
  'each process counts its own (docs/scaling.md "Per process"). The admin page\'s Sessions ' +
  "panel shows each session's use and refusals.",
];

const POOLS = [
  "An entry of `routes[].candidates` is either one candidate or a pool: an object with `pool` " +
  "(its members, each a candidate with a `weight`) and `pick`. The list stays ordered: a request " +
  "tries the member the pool's pick chooses, then the pool's other members in the pick's order, " +
  "then the route's next entry, and every rule of failover, retries, cooldown, hedging, " +
  "mid-stream resume, context overflow, slots and session affinity applies to a member as to " +
  "any candidate. In the example, `spread` sends three requests in four to `openai`, one to " +
  "`openai-b` (two keys, each under its own rate limit), and falls back to `claude` when both " +
  "fail. Picks: `weighted` (by weight, at random), `least_latency` (by the measured time to " +
  "first content and content tokens per second, with a small share of exploration), " +
  "`least_busy` (by the share of `max_in_flight` in use, recent failures counted as slots in " +
  "use) and `cheapest` (by `prices`). How " +
  'they are measured and how they combine with failover and affinity: docs/design.md "Pools".',
];

const INTRO = [
  "pulsegate reads one JSON config file, named by the `PULSEGATE_CONFIG` environment variable. " +
  "It is checked against a strict schema: an unknown field, a value out of range or a reference " +
  "to something that does not exist stops it from loading, with an error naming the exact key " +
  'path (for example `failover.idle_timeout`: unknown field "idle_timeout"). The validated ' +
  "config is stored in the database; the stored copy is what runs and what the admin page edits.",
  "Secrets never go in the file: every `*_env` field holds the NAME of an environment variable " +
  "(such as `OPENAI_API_KEY`), and the gateway reads the secret from its environment.",
  "If the stored config stops validating, the gateway still starts, in safe mode: proxy routes " +
  "answer 503 with code `config.invalid`, and the admin page lists each problem and offers a " +
  "repair (such as deleting an unknown field) that is re-validated before it is stored.",
  "The same schema is served as JSON Schema at `/admin/api/config/schema`, for editors and tools.",
  "Only `upstreams` and `routes` are required; everything else has a default. An example:",
];

const REFERENCE_INTRO = [
  "Generated from `gateway/config/schema.ts` by `deno task docs`; do not edit it by hand. A test " +
  "fails when this table is stale. `upstreams[].id` means the `id` of each entry of `upstreams`.",
];

export function renderConfigDoc(): string {
  const sections = [
    "# Configuration",
    ...INTRO.map((paragraph) => wrap(paragraph)),
    "```json\n" + JSON.stringify(EXAMPLE_CONFIG, null, 2) + "\n```",
    "## Reference",
    ...REFERENCE_INTRO.map((paragraph) => wrap(paragraph)),
    renderTable(referenceRows()),
    "## Pools",
    ...POOLS.map((paragraph) => wrap(paragraph)),
    "## Prices and key limits",
    ...PRICES_AND_LIMITS.map((paragraph) => wrap(paragraph)),
    "## Session limits",
    ...SESSION_LIMITS.map((paragraph) => wrap(paragraph)),
    "## Guardrails",
    wrap(
      "Not part of the config file: the guardrails document is stored with " +
        "`PUT /admin/api/guardrails` (docs/observability.md; why it is bounded: docs/security.md). " +
        "Generated from `gateway/policy/guardrails.ts`.",
    ),
    renderTable(childRows("", z.toJSONSchema(GuardrailsSchema, { io: "input" }))),
  ];
  return sections.join("\n\n") + "\n";
}

/** Greedy fill, as `deno fmt` wraps prose, so the generated file is already formatted. */
function wrap(paragraph: string): string {
  const lines: string[] = [];
  for (const word of paragraph.split(" ")) {
    const last = lines.at(-1);
    if (last !== undefined && last.length + 1 + word.length <= LINE_WIDTH) {
      lines[lines.length - 1] = `${last} ${word}`;
    } else {
      lines.push(word);
    }
  }
  return lines.join("\n");
}

type Row = { key: string; type: string; default: string; allowed: string; description: string };
type Field = { node: JsonSchema; required: boolean; note: string };

function referenceRows(): Row[] {
  return childRows("", configJsonSchema());
}

function fieldRows(path: string, field: Field): Row[] {
  return [rowFor(path, field), ...childRows(path, field.node)];
}

function childRows(path: string, node: JsonSchema): Row[] {
  const shapes = alternatives(node).filter((shape) => shape.type !== "null");
  const [first] = shapes;
  if (shapes.length === 1 && first?.type === "array" && isSchemaObject(first.items)) {
    return childRows(`${path}[]`, first.items);
  }
  // A map keyed by names the operator chooses (prices per model): one row set for any entry.
  if (shapes.length === 1 && !first?.properties && isSchemaObject(first?.additionalProperties)) {
    return childRows(`${path}.<name>`, first.additionalProperties);
  }
  if (shapes.length === 0 || shapes.some((shape) => shape.type !== "object")) return [];
  return [...mergeFields(shapes)].flatMap(([name, field]) =>
    fieldRows(path === "" ? name : `${path}.${name}`, field)
  );
}

type Occurrence = {
  node: JsonSchema;
  required: boolean;
  tag: string | undefined;
  title: string | undefined;
};

/** Folds the shapes of a union (the upstream kinds) into one field list, noting who has what. */
function mergeFields(shapes: JsonSchema[]): Map<string, Field> {
  const seen = new Map<string, Occurrence[]>();
  for (const shape of shapes) {
    for (const [name, node] of Object.entries(shape.properties ?? {})) {
      if (!isSchemaObject(node)) continue;
      const occurrence = { node, required: shape.required?.includes(name) ?? false };
      const tagged = { ...occurrence, tag: discriminator(shape), title: shape.title };
      seen.set(name, [...(seen.get(name) ?? []), tagged]);
    }
  }
  const fields = new Map<string, Field>();
  for (const [name, occurrences] of seen) {
    fields.set(name, mergeOccurrences(occurrences, shapes.length));
  }
  return fields;
}

function mergeOccurrences(occurrences: Occurrence[], shapeCount: number): Field {
  const nodes = occurrences.map((o) => o.node);
  const consts = nodes.map((node) => node.const).filter((value) => value !== undefined);
  const [first] = nodes;
  const node: JsonSchema = consts.length > 1
    ? { ...first, const: undefined, enum: consts }
    : first ?? {};
  const tags = occurrences.map((o) => o.tag).filter((tag) => tag !== undefined);
  const note = occurrences.length < shapeCount ? onlyFor(occurrences, tags) : "";
  return { node, required: occurrences.every((o) => o.required), note };
}

/**
 * Which shapes of a union have the field: the kinds for a tagged union (the upstream kinds), or
 * the shapes' titles for one told apart by its fields (a route entry: a candidate or a pool).
 */
function onlyFor(occurrences: Occurrence[], tags: string[]): string {
  if (tags.length) return `Only for kind ${tags.join(", ")}.`;
  const titles = occurrences.map((o) => o.title).filter((title) => title !== undefined);
  return titles.length ? `Only in a ${titles.join(" or ")} entry.` : "";
}

/** The value that tells a union's shapes apart, such as an upstream's `kind`. */
function discriminator(shape: JsonSchema): string | undefined {
  const tagged = Object.values(shape.properties ?? {}).find((prop) =>
    isSchemaObject(prop) && typeof prop.const === "string"
  );
  return isSchemaObject(tagged) ? `\`${String(tagged.const)}\`` : undefined;
}

function rowFor(path: string, field: Field): Row {
  const { node } = field;
  return {
    key: `\`${path}\``,
    type: typeLabel(node),
    default: defaultLabel(field),
    allowed: allowedLabel(node),
    description: [field.note, node.description ?? ""].filter((part) => part !== "").join(" "),
  };
}

function typeLabel(node: JsonSchema): string {
  const labels = alternatives(node).map((shape) => {
    if (shape.type === "array" && isSchemaObject(shape.items)) return `${typeLabel(shape.items)}[]`;
    return String(shape.type ?? "any");
  });
  return [...new Set(labels)].join(" or ");
}

function defaultLabel(field: Field): string {
  if ("default" in field.node) return `\`${JSON.stringify(field.node.default)}\``;
  return field.required ? "required" : "optional";
}

function allowedLabel(node: JsonSchema): string {
  const parts = alternatives(node).flatMap(constraints);
  return parts.join("; ");
}

function constraints(shape: JsonSchema): string[] {
  const parts: string[] = [];
  if (shape.enum) parts.push(shape.enum.map(literal).join(", "));
  if (shape.const !== undefined) parts.push(literal(shape.const));
  const range = shape.exclusiveMinimum !== undefined && shape.minimum === undefined
    ? `above ${shape.exclusiveMinimum}${
      shape.maximum === undefined ? "" : `, at most ${shape.maximum}`
    }`
    : rangeLabel(shape.minimum, shape.maximum);
  if (range !== "") parts.push(range);
  if (shape.minItems !== undefined) {
    parts.push(`at least ${shape.minItems} item${shape.minItems === 1 ? "" : "s"}`);
  }
  if (shape.pattern !== undefined) parts.push(`\`${shape.pattern}\``);
  if (shape.format === "uri") parts.push("http(s) URL");
  return parts;
}

function rangeLabel(min: number | undefined, max: number | undefined): string {
  if (min !== undefined && max !== undefined) return `${min} to ${max}`;
  if (min !== undefined) return `at least ${min}`;
  if (max !== undefined) return `at most ${max}`;
  return "";
}

function literal(value: unknown): string {
  return `\`${JSON.stringify(value)}\``;
}

const COLUMNS: [keyof Row, string][] = [
  ["key", "Key"],
  ["type", "Type"],
  ["default", "Default"],
  ["allowed", "Allowed values"],
  ["description", "Description"],
];

/** Columns padded the way `deno fmt` pads them, so the file is stable under formatting. */
function renderTable(rows: Row[]): string {
  const cells = [
    COLUMNS.map(([, title]) => title),
    ...rows.map((row) => COLUMNS.map(([column]) => escapeCell(row[column]))),
  ];
  const widths = COLUMNS.map((_, i) => Math.max(3, ...cells.map((line) => line[i]?.length ?? 0)));
  const line = (values: string[]) =>
    `| ${values.map((value, i) => value.padEnd(widths[i] ?? 0)).join(" | ")} |`;
  const [header = [], ...body] = cells;
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...body.map(line)].join("\n");
}

function escapeCell(text: string): string {
  return text.replaceAll("|", "\\|").replaceAll("\n", " ");
}
