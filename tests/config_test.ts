import assert from "node:assert/strict";
import { EXAMPLE_CONFIG } from "../tools/config_doc.ts";
import { configJsonSchema, type JsonSchema } from "../gateway/config/json_schema.ts";
import { applyRepair, proposeRepair } from "../gateway/config/repair.ts";
import { type ConfigInput, type Upstream, upstreamBaseUrl } from "../gateway/config/schema.ts";
import { type ConfigProblem, formatProblems, validateConfig } from "../gateway/config/validate.ts";
import { routeMembers } from "../gateway/config/route_entries.ts";

function minimal(): ConfigInput {
  return {
    upstreams: [
      { id: "openai", kind: "openai-chat", api_key_env: "OPENAI_API_KEY" },
      { id: "claude", kind: "anthropic" },
    ],
    routes: [{
      model: "smart",
      candidates: [{ upstream: "claude", model: "c" }, { upstream: "openai", model: "o" }],
    }],
  };
}

function problemsOf(raw: unknown): ConfigProblem[] {
  const result = validateConfig(raw);
  assert.equal(result.ok, false, "expected the config to be rejected");
  return result.ok ? [] : result.problems;
}

function problemAt(raw: unknown, path: string): ConfigProblem {
  const problems = problemsOf(raw);
  const found = problems.find((p) => p.path === path);
  assert.ok(found, `no problem at ${path}; got:\n${formatProblems(problems)}`);
  return found;
}

/** A copy of `minimal()` with `value` written at `path`. */
function withValue(path: (string | number)[], value: unknown): unknown {
  const raw: Record<string, unknown> = structuredClone(minimal());
  let node: Record<string, unknown> = raw;
  for (const segment of path.slice(0, -1)) {
    node[segment] ??= {};
    node = node[segment] as Record<string, unknown>;
  }
  node[String(path.at(-1))] = value;
  return raw;
}

Deno.test("a config of upstreams and routes alone is complete: defaults fill in", () => {
  const result = validateConfig(minimal());
  assert.ok(result.ok);
  const { config } = result;
  assert.deepEqual(config.failover, {
    idle_timeout_secs: 300,
    slot_wait_secs: 30,
    failures_to_pause: 3,
    pause_secs: 60,
    max_pause_secs: 600,
    retries_per_candidate: 1,
    whole_answer_deadline: null,
    timeout_status: 504,
  });
  assert.deepEqual(config.keys, []);
  assert.equal(config.upstreams[0]?.max_in_flight, 64);
  assert.equal(config.upstreams[0]?.enabled, true);
  assert.equal(config.routes[0]?.enabled, true);
  assert.equal(routeMembers(config.routes[0]!)[0]?.enabled, true);
});

Deno.test("whole_answer_deadline fields default when the object is given", () => {
  const result = validateConfig(withValue(["failover", "whole_answer_deadline"], {}));
  assert.ok(result.ok);
  assert.deepEqual(result.config.failover.whole_answer_deadline, {
    base_secs: 60,
    per_output_token_ms: 25,
    max_secs: 90,
  });
});

Deno.test("the documented example config validates", () => {
  const result = validateConfig(EXAMPLE_CONFIG);
  assert.ok(result.ok, result.ok ? "" : formatProblems(result.problems));
  assert.deepEqual(result.config.keys[0]?.routes, ["smart"]);
});

const RANGES: { path: (string | number)[]; min: number; max: number }[] = [
  { path: ["failover", "idle_timeout_secs"], min: 30, max: 3600 },
  { path: ["failover", "slot_wait_secs"], min: 0, max: 300 },
  { path: ["failover", "failures_to_pause"], min: 1, max: 100 },
  { path: ["failover", "pause_secs"], min: 1, max: 86400 },
  { path: ["failover", "max_pause_secs"], min: 1, max: 86400 },
  { path: ["failover", "retries_per_candidate"], min: 0, max: 10 },
  { path: ["upstreams", 0, "max_in_flight"], min: 1, max: 100000 },
];

const DEADLINE_RANGES: { field: string; min: number; max: number }[] = [
  { field: "base_secs", min: 1, max: 3600 },
  { field: "per_output_token_ms", min: 0, max: 10000 },
  { field: "max_secs", min: 1, max: 3600 },
];

Deno.test("every range violation is reported at its path with both bounds", () => {
  for (const { path, min, max } of RANGES) {
    for (const value of [min - 1, max + 1]) {
      const raw = withValue(path, value);
      const problem = problemAt(raw, path.join("."));
      assert.equal(problem.kind, "invalid");
      assert.equal(problem.message, `must be between ${min} and ${max}`, path.join("."));
    }
  }
});

Deno.test("whole_answer_deadline ranges are reported at their nested path", () => {
  for (const { field, min, max } of DEADLINE_RANGES) {
    for (const value of [min - 1, max + 1]) {
      const raw = withValue(["failover", "whole_answer_deadline"], { [field]: value });
      const problem = problemAt(raw, `failover.whole_answer_deadline.${field}`);
      assert.equal(problem.message, `must be between ${min} and ${max}`);
    }
  }
});

Deno.test("wrong types and values get plain-English messages", () => {
  const fraction = problemAt(
    withValue(["failover", "idle_timeout_secs"], 45.5),
    "failover.idle_timeout_secs",
  );
  assert.equal(fraction.message, "must be a whole number between 30 and 3600");
  const status = problemAt(
    withValue(["failover", "timeout_status"], 502),
    "failover.timeout_status",
  );
  assert.equal(status.message, "must be 504 or 503");
  const flag = problemAt(withValue(["routes", 0, "enabled"], "no"), "routes.0.enabled");
  assert.match(flag.message, /^must be true or false/);
  const kind = problemAt(withValue(["upstreams", 1, "kind"], "claude"), "upstreams.1.kind");
  assert.match(kind.message, /must be one of "openai-chat", "openai-responses", "anthropic"/);
  const url = problemAt(withValue(["upstreams", 0, "base_url"], "ftp://x"), "upstreams.0.base_url");
  assert.equal(url.message, "must be an http:// or https:// URL");
  const env = problemAt(
    withValue(["upstreams", 0, "api_key_env"], "sk-live-123"),
    "upstreams.0.api_key_env",
  );
  assert.match(env.message, /NAME of an environment variable/);
  const missing = problemAt({ upstreams: minimal().upstreams }, "routes");
  assert.equal(missing.message, "is required");
  assert.equal(problemAt(null, "").message, "must be an object, not null");
});

Deno.test("bedrock upstreams need a region and credential env names", () => {
  const raw = withValue(["upstreams", 1], { id: "aws", kind: "bedrock" });
  for (const field of ["region", "access_key_env", "secret_key_env"]) {
    assert.equal(problemAt(raw, `upstreams.1.${field}`).message, "is required");
  }
});

Deno.test("an unknown key is reported at its own full path, however deep", () => {
  const raw = {
    ...minimal(),
    failover: { idle_timeout: 30, whole_answer_deadline: { base_secs: 60, extra: 1 } },
    upstreams: [
      { id: "openai", kind: "openai-chat" },
      { id: "claude", kind: "anthropic", apikey: "ANTHROPIC_API_KEY" },
    ],
    routes: [{ model: "smart", candidates: [{ upstream: "claude", model: "c", weight: 2 }] }],
    version: 2,
  };
  const problems = problemsOf(raw);
  const unknown = problems.filter((p) => p.kind === "unknown_key").map((p) => p.path).sort();
  assert.deepEqual(unknown, [
    "failover.idle_timeout",
    "failover.whole_answer_deadline.extra",
    "routes.0.candidates.0.weight",
    "upstreams.1.apikey",
    "version",
  ]);
  const timeout = problemAt(raw, "failover.idle_timeout");
  assert.equal(timeout.message, 'unknown field "idle_timeout" (did you mean "idle_timeout_secs"?)');
  assert.match(problemAt(raw, "upstreams.1.apikey").message, /^unknown field "apikey"/);
});

Deno.test("two unknown keys in one object give two problems", () => {
  const raw = withValue(["failover", "idle"], 1) as { failover: Record<string, unknown> };
  raw.failover.slots = 2;
  const paths = problemsOf(raw).map((p) => p.path).sort();
  assert.deepEqual(paths, ["failover.idle", "failover.slots"]);
});

Deno.test("duplicate upstream ids are rejected at the second id", () => {
  const raw = withValue(["upstreams", 1, "id"], "openai");
  assert.match(problemAt(raw, "upstreams.1.id").message, /already used by upstreams\.0/);
});

Deno.test("a candidate naming a missing upstream is rejected at that candidate", () => {
  const raw = withValue(["routes", 0, "candidates", 1, "upstream"], "gemini");
  assert.equal(
    problemAt(raw, "routes.0.candidates.1.upstream").message,
    'no upstream has id "gemini"',
  );
});

Deno.test("route models and key ids must be unique; key routes must exist", () => {
  const raw = {
    ...minimal(),
    routes: [...minimal().routes, ...minimal().routes],
    keys: [
      { id: "app", key_env: "KEY_A", routes: ["smart", "fast"] },
      { id: "app", key_env: "KEY_B" },
    ],
  };
  assert.match(problemAt(raw, "routes.1.model").message, /already used by routes\.0/);
  assert.match(problemAt(raw, "keys.1.id").message, /already used by keys\.0/);
  assert.equal(problemAt(raw, "keys.0.routes.1").message, 'no route has model "fast"');
});

Deno.test("max_pause_secs below pause_secs is rejected at max_pause_secs", () => {
  const raw = withValue(["failover"], { pause_secs: 120, max_pause_secs: 60 });
  assert.equal(
    problemAt(raw, "failover.max_pause_secs").message,
    "must be at least pause_secs (120)",
  );
});

Deno.test("formatProblems gives one line per problem", () => {
  const text = formatProblems([
    { path: "failover.idle_timeout", message: 'unknown field "idle_timeout"', kind: "unknown_key" },
    { path: "", message: "must be an object, not null", kind: "invalid" },
  ]);
  assert.equal(
    text,
    'failover.idle_timeout: unknown field "idle_timeout"\n(config): must be an object, not null',
  );
});

Deno.test("repair deletes unknown keys and the result validates", () => {
  const raw = {
    ...minimal(),
    failover: { idle_timeout: 30, pause_secs: 90 },
    upstreams: [
      { id: "openai", kind: "openai-chat", apikey: "X" },
      { id: "claude", kind: "anthropic" },
    ],
  };
  const proposal = proposeRepair(raw);
  assert.ok(proposal);
  assert.deepEqual(proposal.actions, [
    { op: "delete", path: "failover.idle_timeout", reason: "unknown field" },
    { op: "delete", path: "upstreams.0.apikey", reason: "unknown field" },
  ]);
  const result = validateConfig(proposal.repaired);
  assert.ok(result.ok);
  assert.equal(result.config.failover.pause_secs, 90);
  assert.ok("idle_timeout" in raw.failover, "the input must not be modified");
});

Deno.test("repair resets an out-of-range number to its default", () => {
  const proposal = proposeRepair(withValue(["failover", "idle_timeout_secs"], 5));
  assert.ok(proposal);
  assert.deepEqual(proposal.actions, [{
    op: "reset",
    path: "failover.idle_timeout_secs",
    reason: "must be between 30 and 3600; default is 300",
    value: 300,
  }]);
  assert.ok(validateConfig(proposal.repaired).ok);
});

Deno.test("repair is null when another error would remain", () => {
  const raw = { ...withValue(["failover", "junk"], 1) as object, routes: [] };
  assert.equal(proposeRepair(raw), null);
  const duplicate = withValue(["upstreams", 1], { id: "openai", kind: "gemini", extra: 1 });
  assert.equal(proposeRepair(duplicate), null, "the duplicate id shows up once extra is gone");
  const keyRoutes = { ...minimal(), keys: [{ id: "a", key_env: "A", routes: [] }] };
  assert.equal(proposeRepair(keyRoutes), null, "never widen a key to every route");
});

Deno.test("repair is null for a valid config", () => {
  assert.equal(proposeRepair(minimal()), null);
});

Deno.test("applyRepair applies only the chosen actions, to a copy", () => {
  const raw = { a: { "b.c": 1, d: 2 }, list: [{ e: 1 }] };
  const repaired = applyRepair(raw, [
    { op: "delete", path: "a.b.c", reason: "unknown field" },
    { op: "reset", path: "list.0.e", reason: "", value: 5 },
    { op: "delete", path: "missing.key", reason: "unknown field" },
  ]);
  assert.deepEqual(repaired, { a: { d: 2 }, list: [{ e: 5 }] });
  assert.deepEqual(raw, { a: { "b.c": 1, d: 2 }, list: [{ e: 1 }] });
});

function objectNodes(node: unknown): JsonSchema[] {
  if (typeof node !== "object" || node === null) return [];
  const children = Object.values(node).flatMap(objectNodes);
  const self = !Array.isArray(node) && (node as JsonSchema).type === "object";
  return self ? [node as JsonSchema, ...children] : children;
}

Deno.test("the JSON Schema is closed and does not require defaulted fields", () => {
  const schema = configJsonSchema();
  const objects = objectNodes(schema);
  assert.ok(objects.length >= 8);
  for (const node of objects) {
    // A map (prices keyed by model) has operator-chosen keys, each value itself closed.
    if (!node.properties && typeof node.additionalProperties === "object") continue;
    assert.equal(node.additionalProperties, false, JSON.stringify(node).slice(0, 120));
    for (const name of node.required ?? []) {
      const property = node.properties?.[name];
      assert.ok(typeof property === "object" && !("default" in property), `${name} has a default`);
    }
  }
  assert.deepEqual(schema.required, ["upstreams", "routes"]);
  const failover = schema.properties?.failover;
  assert.ok(typeof failover === "object" && failover.required === undefined);
  assert.equal(configJsonSchema(), schema, "the schema is built once");
});

Deno.test("upstreamBaseUrl falls back to each kind's public endpoint", () => {
  const base = { max_in_flight: 64, enabled: true };
  const cases: [Upstream, string][] = [
    [{ ...base, id: "a", kind: "openai-chat" }, "https://api.openai.com/v1"],
    [{ ...base, id: "b", kind: "openai-responses" }, "https://api.openai.com/v1"],
    [{ ...base, id: "c", kind: "anthropic" }, "https://api.anthropic.com"],
    [{ ...base, id: "d", kind: "gemini" }, "https://generativelanguage.googleapis.com"],
    [
      {
        ...base,
        id: "e",
        kind: "bedrock",
        region: "eu-west-1",
        access_key_env: "A",
        secret_key_env: "S",
      },
      "https://bedrock-runtime.eu-west-1.amazonaws.com",
    ],
    [
      { ...base, id: "f", kind: "openai-chat", base_url: "http://localhost:8000/v1/" },
      "http://localhost:8000/v1",
    ],
  ];
  for (const [upstream, expected] of cases) assert.equal(upstreamBaseUrl(upstream), expected);
});
