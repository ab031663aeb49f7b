import assert from "node:assert/strict";
import { type Db, openDatabase } from "../db/client.ts";
import { KEY_REFUSED_ROWS_PER_MINUTE } from "../gateway/policy/refused_budget.ts";
import { chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { type FakeUpstream, startFakeUpstream } from "./fake_upstreams/server.ts";
import { eventually } from "./harness.ts";
import {
  assertResponsive,
  type HealthPolls,
  MEDIAN_HEALTH_ONE_BODY_MS,
  pollHealth,
} from "./health_poll.ts";
import { type SpawnedGateway, spawnGateway } from "./spawn_gateway.ts";

/**
 * A generated corpus of bad requests thrown at a running gateway process (docs/security.md):
 * every one gets its 4xx in the caller's format, none reaches the upstream, every one that is
 * recorded has its row, and `/healthz` keeps answering quickly throughout.
 *
 * To add cases (deep JSON, upstream byte caps, guardrail timeouts, ...): append rows to
 * `EXTRA_CASES` below, or a generator to `FORMAT_CASES` for one case per client format. Each row
 * says the status it must get and whether it must be recorded; the checks are the same for all.
 */

const KEY = "hostile-test-key";
const MODEL = "smart";

/** One bad request and what the gateway must do with it. */
interface HostileCase {
  name: string;
  /** Default POST. */
  method?: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
  /** The status the gateway must answer. */
  status: number;
  /** The gateway's code (`x-pulsegate-error-code`), where the case pins one. */
  code?: string;
  /** Whether a history row must exist under the answer's `x-request-id`, with this status. */
  recorded: boolean;
}

/** How one client format addresses the gateway. */
interface ClientShape {
  format: string;
  path(model: string): string;
  auth(key: string): Record<string, string>;
  /** A valid body for `model`; Gemini's names its model in the path instead. */
  body(model: string): Record<string, unknown>;
  /** Fields of the right name and the wrong type, one case each. */
  wrongTypes: Record<string, unknown>[];
  /**
   * Bodies carrying `text`, a JSON text, where the format holds JSON as a string (tool-call
   * arguments, tool results); none where it has no such string (Gemini).
   */
  jsonTexts(model: string, text: string): Record<string, unknown>[];
}

/** `[[[...]]]` nested `depth` deep, as JSON text. */
const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth);
/** A JSON array of `n` zeros. */
const zeros = (n: number) => `[${"0,".repeat(n - 1)}0]`;
const MB = 1024 * 1024;

const SHAPES: ClientShape[] = [
  {
    format: "openai-chat",
    path: () => "/v1/chat/completions",
    auth: (key) => ({ authorization: `Bearer ${key}` }),
    body: (model) => ({ model, messages: [{ role: "user", content: "hi" }] }),
    wrongTypes: [
      { model: 42 },
      { messages: "hi" },
      { messages: [{ role: "user", content: 42 }] },
      { messages: [{ role: 7, content: "hi" }] },
      { stream: "yes" },
    ],
    jsonTexts: (model, text) => [
      chatToolCall(model, { args: `{"a":${text}}`, result: "done" }),
      chatToolCall(model, { args: "{}", result: text }),
    ],
  },
  {
    format: "openai-responses",
    path: () => "/v1/responses",
    auth: (key) => ({ authorization: `Bearer ${key}` }),
    body: (model) => ({ model, input: "hi" }),
    wrongTypes: [{ model: 42 }, { input: 42 }, { input: [{ role: "user", content: 42 }] }, {
      stream: "yes",
    }],
    jsonTexts: (model, text) => [
      responsesCall(model, { args: `{"a":${text}}`, result: "done" }),
      responsesCall(model, { args: "{}", result: text }),
    ],
  },
  {
    format: "anthropic",
    path: () => "/v1/messages",
    auth: (key) => ({ "x-api-key": key, "anthropic-version": "2023-06-01" }),
    body: (model) => ({ model, max_tokens: 16, messages: [{ role: "user", content: "hi" }] }),
    wrongTypes: [
      { model: 42 },
      { messages: "hi" },
      { messages: [{ role: "user", content: 42 }] },
      { max_tokens: "many" },
      { stream: "yes" },
    ],
    jsonTexts: (model, text) => [{
      model,
      max_tokens: 16,
      messages: [
        { role: "user", content: "hi" },
        { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "f", input: {} }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: text }] },
      ],
    }, {
      model,
      max_tokens: 16,
      metadata: { user_id: `{"session_id":${text}}` },
      messages: [{ role: "user", content: "hi" }],
    }],
  },
  {
    format: "gemini",
    path: (model) => `/v1beta/models/${model}:generateContent`,
    auth: (key) => ({ "x-goog-api-key": key }),
    body: () => ({ contents: [{ role: "user", parts: [{ text: "hi" }] }] }),
    wrongTypes: [
      { contents: "hi" },
      { contents: [{ role: "user", parts: "hi" }] },
      { contents: [{ role: "user", parts: [{ text: 42 }] }] },
      { generationConfig: "hot" },
    ],
    jsonTexts: () => [],
  },
  {
    format: "gemini-interactions",
    path: () => "/v1beta/interactions",
    auth: (key) => ({ "x-goog-api-key": key }),
    body: (model) => ({ model, input: "hi" }),
    wrongTypes: [
      { model: 42 },
      { input: 42 },
      { input: [{ type: "text", text: 42 }] },
      { input: [{ type: 7 }] },
      { input: [{ type: "function_call", name: "f", id: "c", arguments: "{}" }] },
      { generation_config: "hot" },
      { previous_interaction_id: 42 },
      { store: "no" },
      { stream: "yes" },
    ],
    // Arguments are objects and results are read as text: no JSON text is parsed again.
    jsonTexts: () => [],
  },
];

/** A Chat conversation whose assistant called `f` with `args`, answered with `result`. */
function chatToolCall(model: string, opts: { args: string; result: string }) {
  return {
    model,
    messages: [
      { role: "user", content: "hi" },
      {
        role: "assistant",
        tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: opts.args } }],
      },
      { role: "tool", tool_call_id: "c1", content: opts.result },
    ],
  };
}

/** The same in a Responses input. */
function responsesCall(model: string, opts: { args: string; result: string }) {
  return {
    model,
    input: [
      { role: "user", content: "hi" },
      { type: "function_call", call_id: "c1", name: "f", arguments: opts.args },
      { type: "function_call_output", call_id: "c1", output: opts.result },
    ],
  };
}

const json = { "content-type": "application/json" };

/** One generator per kind of mistake; each yields its cases for one client format. */
const FORMAT_CASES: Array<(s: ClientShape) => HostileCase[]> = [
  // Missing and wrong keys: refused before anything else is read.
  (s) =>
    [
      { name: "no key", headers: json, body: JSON.stringify(s.body(MODEL)) },
      {
        name: "wrong key",
        headers: { ...json, ...s.auth("nope") },
        body: JSON.stringify(s.body(MODEL)),
      },
    ].map((c) => ({
      ...c,
      path: s.path(MODEL),
      status: 401,
      code: "gw.client.unauthorized",
      recorded: true,
    })),
  // Bodies that are not JSON, or not a JSON object.
  (s) =>
    ["", "{", '{"model": ', "not json", "[]", '"hi"', "42", "null", "\u0000\u0001"].map((body) => ({
      name: `body ${JSON.stringify(body)}`,
      path: s.path(MODEL),
      headers: { ...json, ...s.auth(KEY) },
      body,
      status: 400,
      recorded: true,
    })),
  // The right fields with the wrong types.
  (s) =>
    s.wrongTypes.map((wrong) => ({
      name: `wrong type ${JSON.stringify(wrong)}`,
      path: s.path(MODEL),
      headers: { ...json, ...s.auth(KEY) },
      body: JSON.stringify({ ...s.body(MODEL), ...wrong }),
      status: 400,
      recorded: true,
    })),
  // Unknown and huge model names, and a huge field on an unknown route (never sent on).
  (s) =>
    [
      { name: "unknown model", model: "no-such-route", pad: 0 },
      // Gemini names the model in the path, where a client sends at most a few KB.
      s.format === "gemini"
        ? { name: "4 KB model name", model: "m".repeat(4_000), pad: 0 }
        : { name: "100 KB model name", model: "m".repeat(100_000), pad: 0 },
      { name: "2 MB message, unknown model", model: "no-such-route", pad: 2_000_000 },
    ].map(({ name, model, pad }) => {
      const body = s.body(model);
      if (pad) body.padding = "x".repeat(pad);
      return {
        name,
        path: s.path(s.format === "gemini" ? model : MODEL),
        headers: { ...json, ...s.auth(KEY) },
        body: JSON.stringify(body),
        status: 404,
        code: "gw.client.unknown_model",
        recorded: true,
      };
    }),
  // JSON nested deeper than 128 levels, in the body and in the JSON texts inside it
  // (docs/security.md "Deep JSON").
  (s) =>
    [{ ...s.body(MODEL), x: JSON.parse(nested(200)) }, ...s.jsonTexts(MODEL, nested(200))].map(
      (body, i) => ({
        name: `JSON nested 200 deep (${i})`,
        path: s.path(MODEL),
        headers: { ...json, ...s.auth(KEY) },
        body: JSON.stringify(body),
        status: 400,
        code: "gw.client.invalid_json",
        recorded: true,
      }),
    ),
  // Request ids outside the rule: the caller's mistake, recorded under a generated id.
  (s) =>
    ["has space", "x".repeat(129), "semi;colon", "ünïcode"].map((id) => ({
      name: `x-request-id ${JSON.stringify(id.slice(0, 20))}`,
      path: s.path(MODEL),
      headers: { ...json, ...s.auth(KEY), "x-request-id": id },
      body: JSON.stringify(s.body(MODEL)),
      status: 400,
      recorded: true,
    })),
  // Wrong content types with a body that is not JSON either.
  (s) =>
    ["text/plain", "multipart/form-data; boundary=x", "application/x-www-form-urlencoded"].map(
      (type) => ({
        name: `content-type ${type}`,
        path: s.path(MODEL),
        headers: { ...s.auth(KEY), "content-type": type },
        body: "model=smart&messages=hi",
        // Refused for its type before the body is read (docs/security.md, open mode).
        status: 415,
        code: "gw.client.unsupported_media_type",
        recorded: true,
      }),
    ),
];

/** Paths no route serves: answered 404 in a client's format, not recorded (no request ran). */
const PATH_CASES: HostileCase[] = [
  "/v1/chat/completion",
  "/v1/chat/completions/extra",
  "/v1/message",
  "/v1beta/models/smart:explode",
  `/v1beta/models/${"m".repeat(10_000)}:explode`,
  "/v1/../v1/chat/completions/..%2f..%2fadmin",
  "/%00",
  "/v2/chat/completions",
  "/v1beta/interactions/a/b",
].map((path) => ({
  name: `path ${path.slice(0, 40)}`,
  path,
  headers: { ...json, authorization: `Bearer ${KEY}` },
  body: "{}",
  status: 404,
  recorded: false,
}));

/** Routes asked with a method they do not serve. */
const METHOD_CASES: HostileCase[] = [
  ["GET", "/v1/chat/completions"],
  ["PUT", "/v1/messages"],
  ["DELETE", "/v1/responses"],
  ["PATCH", "/v1beta/models/smart:generateContent"],
  ["PUT", "/v1beta/interactions"],
  ["PATCH", "/v1beta/interactions/some-id"],
  ["GET", "/v1beta/interactions/some-id/cancel"],
].map(([method, path]) => ({
  name: `${method} ${path}`,
  method,
  path: path!,
  headers: { ...json, authorization: `Bearer ${KEY}` },
  body: method === "GET" ? undefined : "{}",
  status: 405,
  code: "gw.client.method_not_allowed",
  recorded: false,
}));

/** Stored interactions this key has none of: 404 in Google's shape, nothing asked or recorded. */
const INTERACTION_CASES: HostileCase[] = [
  ["GET", "/v1beta/interactions/never-made"],
  ["DELETE", `/v1beta/interactions/${"i".repeat(10_000)}`],
  ["POST", "/v1beta/interactions/never-made/cancel"],
].map(([method, path]) => ({
  name: `${method} ${path!.slice(0, 40)}`,
  method,
  path: path!,
  headers: { "x-goog-api-key": KEY },
  status: 404,
  code: "gw.client.unknown_interaction",
  recorded: false,
}));

/**
 * Continuation ids and tokens the gateway never handed to this key, short, megabytes long and by
 * the thousand (docs/design.md "Continuation ids"): 404 in the caller's format,
 * recorded, nothing asked of the upstream; one of the wrong type is a 400.
 */
const CONTINUATION_CASES: HostileCase[] = [
  ["responses", { model: MODEL, input: "hi", previous_response_id: "resp_never_handed_out" }],
  ["responses", { model: MODEL, input: "hi", conversation: { id: "c".repeat(MB) } }],
  ["responses", {
    model: MODEL,
    input: Array.from({ length: 10_000 }, (_, i) => ({ type: "item_reference", id: `msg_${i}` })),
  }],
  ["interactions", { model: MODEL, input: "hi", continuation_token: "t".repeat(MB) }],
  ["responses", { model: MODEL, input: "hi", conversation: 42 }],
].map(([api, body], i) => {
  const responses = api === "responses";
  const wrongType = i === 4;
  return {
    name: `${api}: continuation ${i}`,
    path: responses ? "/v1/responses" : "/v1beta/interactions",
    headers: {
      ...json,
      ...(responses ? { authorization: `Bearer ${KEY}` } : { "x-goog-api-key": KEY }),
    },
    body: JSON.stringify(body),
    status: wrongType ? 400 : 404,
    code: wrongType ? "gw.client.invalid_request" : "gw.client.unknown_continuation",
    recorded: true,
  };
});

/** A Gemini call that names no model: the caller's mistake in a route's path. */
const NO_MODEL_CASE: HostileCase = {
  name: "gemini: no model in the path",
  path: "/v1beta/models/:generateContent",
  headers: { ...json, "x-goog-api-key": KEY },
  body: JSON.stringify(SHAPES[3]!.body(MODEL)),
  status: 400,
  code: "gw.client.invalid_request",
  recorded: true,
};

/**
 * The bodies that stalled the gateway longest, `mb` megabytes each (docs/security.md "Deep
 * JSON"): JSON texts nested millions deep inside a body (8 MB held the serving thread 10-13 s,
 * 31 MB 235 s), millions of tiny values (30 MB took seconds to parse and walk), and a model name
 * of megabytes (stored twice per row and echoed whole). The corpus throws them at 2 MB, in
 * company; the test after it sends each at its full size, alone.
 */
function worstBodies(mb: number): Array<() => HostileCase> {
  const half = Math.floor((mb * MB) / 2);
  const invalid = { status: 400, code: "gw.client.invalid_json" };
  const chat = "/v1/chat/completions";
  const cases = [
    {
      name: "tool-call arguments nested deep",
      path: chat,
      body: () => JSON.stringify(chatToolCall(MODEL, { args: nested(half), result: "ok" })),
      ...invalid,
    },
    {
      name: "tool result nested deep",
      path: chat,
      body: () => JSON.stringify(chatToolCall(MODEL, { args: "{}", result: nested(half) })),
      ...invalid,
    },
    {
      name: "Responses arguments nested deep",
      path: "/v1/responses",
      body: () => JSON.stringify(responsesCall(MODEL, { args: nested(half), result: "ok" })),
      ...invalid,
    },
    {
      name: "a body of small values",
      path: chat,
      body: () => `{"model":"${MODEL}","messages":[],"x":${zeros(half)}}`,
      ...invalid,
    },
    {
      name: "tool-call arguments of small values",
      path: chat,
      body: () =>
        JSON.stringify(chatToolCall(MODEL, { args: `{"a":${zeros(half)}}`, result: "ok" })),
      ...invalid,
    },
    {
      name: "a model name",
      path: chat,
      body: () => JSON.stringify(SHAPES[0]!.body("m".repeat(Math.min(mb, 12) * MB))),
      status: 404,
      code: "gw.client.unknown_model",
    },
  ];
  return cases.map((c) => () => {
    const body = c.body();
    return {
      ...c,
      name: `worst body: ${c.name} (${(body.length / MB).toFixed(0)} MB)`,
      headers: { ...json, authorization: `Bearer ${KEY}` },
      body,
      recorded: true,
    };
  });
}

/** Cases added by other work: the worst bodies, at a size the corpus throws many of at once. */
const EXTRA_CASES: HostileCase[] = worstBodies(2).map((make) => make());

function corpus(): HostileCase[] {
  const perFormat = SHAPES.flatMap((shape) =>
    FORMAT_CASES.flatMap((make) =>
      make(shape).map((c) => ({ ...c, name: `${shape.format}: ${c.name}` }))
    )
  );
  return [
    ...perFormat,
    ...PATH_CASES,
    ...METHOD_CASES,
    ...INTERACTION_CASES,
    ...CONTINUATION_CASES,
    NO_MODEL_CASE,
    ...EXTRA_CASES,
  ];
}

interface Answer {
  c: HostileCase;
  status: number;
  id: string | null;
  problems: string[];
}

/** The longest error answer a case may get back. */
const MAX_ANSWER_CHARS = 4_096;

/** Sends one case; its problems say where the answer is not what the case requires. */
async function send(url: string, c: HostileCase): Promise<Answer> {
  const res = await fetch(`${url}${c.path}`, {
    method: c.method ?? "POST",
    headers: c.headers,
    body: c.body,
  });
  const text = await res.text();
  const problems: string[] = [];
  const said = `${res.status} ${res.headers.get("x-pulsegate-error-code")} ${text.slice(0, 160)}`;
  if (res.status !== c.status) problems.push(`${c.name}: wanted ${c.status}, got ${said}`);
  // Whatever the caller sent, the answer quotes a bounded part of it (docs/security.md).
  if (text.length > MAX_ANSWER_CHARS) {
    problems.push(`${c.name}: the answer is ${text.length} characters long: ${said}`);
  }
  const code = res.headers.get("x-pulsegate-error-code");
  if (c.code && code !== c.code) problems.push(`${c.name}: wanted code ${c.code}, got ${said}`);
  try {
    JSON.parse(text);
  } catch {
    problems.push(`${c.name}: the error is not JSON: ${said}`);
  }
  return { c, status: res.status, id: res.headers.get("x-request-id"), problems };
}

/** A gateway key, its env var and its secret. */
interface TestKey {
  id: string;
  key_env: string;
  key: string;
}

const ONE_KEY: TestKey[] = [{ id: "hostile", key_env: "PULSEGATE_KEY_HOSTILE", key: KEY }];

/**
 * The case sent with `key` in place of KEY. Spread over keys, every case stays within its key's
 * budget of recorded refusals (docs/security.md "Refused floods"), so each can be checked for its
 * row.
 */
function withKey(c: HostileCase, key: string): HostileCase {
  const headers = Object.fromEntries(
    Object.entries(c.headers).map(([name, value]) => [name, value.replaceAll(KEY, key)]),
  );
  return { ...c, headers };
}

/** A gateway process with one route and `keys` over a fake upstream, stopped after `run`. */
async function withSpawnedGateway(
  run: (gw: SpawnedGateway, opts: { up: FakeUpstream; db: Db }) => Promise<void>,
  keys: TestKey[] = ONE_KEY,
): Promise<void> {
  const up = startFakeUpstream({
    fallback: () => chatWhole({ text: ["ok"], usage: { input: 1, output: 1 } }),
  });
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-hostile-" });
  const config = `${dir}/config.json`;
  await Deno.writeTextFile(
    config,
    JSON.stringify({
      upstreams: [{ id: "up1", kind: "openai-chat", base_url: up.url }],
      routes: [{ model: MODEL, candidates: [{ upstream: "up1", model: "m" }] }],
      keys: keys.map(({ id, key_env }) => ({ id, key_env })),
    }),
  );
  const gw = await spawnGateway(dir, {
    env: {
      PULSEGATE_CONFIG: config,
      ...Object.fromEntries(keys.map((k) => [k.key_env, k.key])),
    },
  });
  const db = await openDatabase(`file:${dir}/pulsegate.db`, { busyTimeoutMs: 5_000 });
  try {
    await run(gw, { up, db });
  } finally {
    db.close();
    gw.child.kill("SIGTERM");
    await gw.child.status;
    await up.close();
  }
}

Deno.test("a corpus of bad requests: 4xx in the caller's format, recorded, /healthz stays quick", async () => {
  // The corpus three times over: a longer flood, and more polls to judge it by.
  const corpusCases = [...corpus(), ...corpus(), ...corpus()];
  const keys = Array.from(
    { length: Math.ceil(corpusCases.length / KEY_REFUSED_ROWS_PER_MINUTE) },
    (_, k) => ({ id: `hostile-${k}`, key_env: `PULSEGATE_KEY_HOSTILE_${k}`, key: `${KEY}-${k}` }),
  );
  const cases = corpusCases.map((c, i) => withKey(c, keys[i % keys.length]!.key));
  await withSpawnedGateway(async (gw, { up, db }) => {
    let health: HealthPolls = { times: [], failures: [] };
    const poller = await pollHealth(gw.url);
    const answers: Answer[] = [];
    const problems: string[] = [];
    try {
      // Eight callers at once, each taking the next case.
      let next = 0;
      await Promise.all(Array.from({ length: 8 }, async () => {
        for (let i = next++; i < cases.length; i = next++) {
          const answer = await send(gw.url, cases[i]!);
          answers.push(answer);
          problems.push(...answer.problems);
        }
      }));
    } finally {
      health = await poller.stop();
    }
    assert.deepEqual(problems, [], "every case answered as its row says");
    assert.equal(answers.length, cases.length);
    assert.equal(up.calls.length, 0, "no bad request reached the upstream");

    // Every recorded case has its row, with the status its caller got; the others have none.
    const recorded = answers.filter((a) => a.c.recorded);
    for (const a of recorded) assert.ok(a.id, `${a.c.name}: carries x-request-id`);
    const expected = new Map(recorded.map((a) => [a.id!, a]));
    let rows = new Map<string, number>();
    for (let i = 0; i < 200; i++) {
      const result = await db.client.execute(
        "SELECT id, status FROM requests WHERE state = 'closed'",
      );
      rows = new Map(result.rows.map((r) => [String(r.id), Number(r.status)]));
      if ([...expected.keys()].every((id) => rows.has(id))) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    for (const [id, a] of expected) {
      assert.equal(rows.get(id), a.status, `${a.c.name}: its row holds the status it got`);
    }
    assert.equal(rows.size, expected.size, "no row for a case that is not recorded");

    assert.ok(health.times.length >= 5, `polled /healthz ${health.times.length} times`);
    assert.ok(cases.length >= 300, `${cases.length} cases`);
    assertResponsive(health, "the corpus");
  }, keys);
});

Deno.test("the worst bodies at full size (up to 31 MB), each alone: answered, recorded, /healthz stays quick", async () => {
  await withSpawnedGateway(async (gw, { up, db }) => {
    for (const make of worstBodies(31)) {
      const c = make();
      const poller = await pollHealth(gw.url);
      let answer: Answer;
      try {
        answer = await send(gw.url, c);
      } finally {
        assertResponsive(await poller.stop(), c.name, { medianMs: MEDIAN_HEALTH_ONE_BODY_MS });
      }
      assert.deepEqual(answer.problems, []);
      await eventually(async () => {
        const row = await db.client.execute({
          sql: "SELECT status FROM requests WHERE id = ? AND state = 'closed'",
          args: [answer.id],
        });
        return Number(row.rows[0]?.status) === c.status;
      }, { what: `${c.name}: its row holds ${c.status}` });
    }
    assert.equal(up.calls.length, 0, "no worst body reached the upstream");
  });
});
