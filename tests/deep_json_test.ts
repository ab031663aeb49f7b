import assert from "node:assert/strict";
import { postJson, startTestGateway, type TestGateway } from "./harness.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";
import { chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { MAX_JSON_DEPTH, MAX_JSON_VALUES } from "../gateway/formats/json_guard.ts";
import { validateConfig } from "../gateway/config/validate.ts";
import type { Config, ConfigInput } from "../gateway/config/schema.ts";
import type { UpstreamAdapter } from "../gateway/formats/format.ts";
import { chatClient, chatUpstream } from "../gateway/formats/openai_chat/mod.ts";
import { anthropicUpstream } from "../gateway/formats/anthropic/mod.ts";
import { geminiUpstream } from "../gateway/formats/gemini/mod.ts";

/** `[[[...]]]` nested `depth` deep, as JSON text. */
const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth);

const config = (url: string): ConfigInput => ({
  upstreams: [{ id: "up", kind: "openai-chat", base_url: url }],
  routes: [{ model: "smart", candidates: [{ upstream: "up", model: "m" }] }],
});

/** Each client format's request with a 200-deep array in a field, and how its error reads. */
const CLIENTS: {
  name: string;
  path: string;
  body: string;
  message: (body: Record<string, unknown>) => unknown;
}[] = [
  {
    name: "OpenAI chat",
    path: "/v1/chat/completions",
    body: `{"model":"smart","messages":[{"role":"user","content":"hi"}],"x":${nested(200)}}`,
    message: (b) => (b.error as Record<string, unknown>).message,
  },
  {
    name: "Anthropic messages",
    path: "/v1/messages",
    body: `{"model":"smart","max_tokens":5,"messages":[{"role":"user","content":"hi"}],` +
      `"metadata":{"x":${nested(200)}}}`,
    message: (b) => {
      assert.equal(b.type, "error");
      return (b.error as Record<string, unknown>).message;
    },
  },
  {
    name: "Gemini generateContent",
    path: "/v1beta/models/smart:generateContent",
    body: `{"contents":[{"parts":[{"text":"hi"}]}],"x":${nested(200)}}`,
    message: (b) => {
      assert.equal((b.error as Record<string, unknown>).status, "INVALID_ARGUMENT");
      return (b.error as Record<string, unknown>).message;
    },
  },
  {
    name: "Responses",
    path: "/v1/responses",
    body: `{"model":"smart","input":"hi","x":${nested(200)}}`,
    message: (b) => (b.error as Record<string, unknown>).message,
  },
];

async function withGateway(run: (gw: TestGateway) => Promise<void>): Promise<number> {
  const up = startFakeUpstream({ fallback: () => chatWhole({ text: ["ok"] }) });
  const gw = await startTestGateway(config(up.url));
  try {
    await run(gw);
  } finally {
    await gw.stop();
    await up.close();
  }
  return up.calls.length;
}

Deno.test("a body nested 200 deep is a 400 in each client's format, recorded, never sent on", async () => {
  const calls = await withGateway(async (gw) => {
    for (const client of CLIENTS) {
      const res = await postJson(`${gw.url}${client.path}`, client.body);
      const body = await res.json();
      assert.equal(res.status, 400, client.name);
      assert.equal(res.headers.get("x-pulsegate-error-code"), "gw.client.invalid_json");
      assert.match(
        String(client.message(body)),
        new RegExp(`deeper than ${MAX_JSON_DEPTH} levels`),
        client.name,
      );
      const { request } = await gw.row(res.headers.get("x-request-id")!);
      assert.equal(request.status, 400, client.name);
      assert.equal(request.errorCode, "gw.client.invalid_json", client.name);
    }
  });
  assert.equal(calls, 0);
});

Deno.test("a body nested exactly to the limit is taken", async () => {
  const calls = await withGateway(async (gw) => {
    // The body's own object is one level: the field may add MAX_JSON_DEPTH - 1 more.
    const body = `{"model":"smart","messages":[{"role":"user","content":"hi"}],` +
      `"x":${nested(MAX_JSON_DEPTH - 1)}}`;
    const res = await postJson(`${gw.url}/v1/chat/completions`, body);
    assert.equal(res.status, 200);
    assert.equal((await res.json()).choices[0].message.content, "ok");
  });
  assert.equal(calls, 1);
});

Deno.test("brackets inside strings do not count, whatever their escapes; the nesting after them does", async () => {
  const brackets = "[{".repeat(MAX_JSON_DEPTH);
  // An escaped quote does not end the string; an escaped backslash before a quote does.
  const inString = `"say \\"${brackets}\\\\"`;
  const taken = `{"model":"smart","messages":[{"role":"user","content":${inString}}]}`;
  const deep = `{"model":"smart","messages":[{"role":"user","content":"a\\\\"}],` +
    `"x":${nested(MAX_JSON_DEPTH)}}`;
  const calls = await withGateway(async (gw) => {
    const ok = await postJson(`${gw.url}/v1/chat/completions`, taken);
    assert.equal(ok.status, 200);
    await ok.body?.cancel();
    const refused = await postJson(`${gw.url}/v1/chat/completions`, deep);
    assert.equal(refused.status, 400);
    assert.match((await refused.json()).error.message, /deeper than/);
  });
  assert.equal(calls, 1);
});

Deno.test("a 10 MB deep body is refused quickly, and /healthz answers meanwhile", async () => {
  await withGateway(async (gw) => {
    const half = 5 * 1024 * 1024;
    const body = `{"model":"smart","messages":[],"x":${"[".repeat(half)}${"]".repeat(half)}}`;
    const started = performance.now();
    const deep = postJson(`${gw.url}/v1/chat/completions`, body).then(async (res) => {
      await res.body?.cancel();
      return { status: res.status, ms: performance.now() - started };
    });
    const health: number[] = [];
    let done = false;
    void deep.finally(() => (done = true));
    // At least one probe, and probes for as long as the deep request runs.
    do {
      const at = performance.now();
      const res = await fetch(`${gw.url}/healthz`);
      assert.equal(res.status, 200);
      await res.body?.cancel();
      health.push(performance.now() - at);
    } while (!done);
    const answer = await deep;
    assert.equal(answer.status, 400);
    // Loose bounds: the defect took 27.8 s and held /healthz 18.8 s.
    assert.ok(answer.ms < 5000, `deep body answered in ${answer.ms} ms`);
    assert.ok(Math.max(...health) < 2000, `slowest /healthz: ${Math.max(...health)} ms`);
  });
});

// --- the JSON texts inside a body ---------------------------------------------

/** A conversation whose assistant called tool `f` with `args`, answered with `result`. */
const chatCall = (args: string, result = "done") => ({
  model: "smart",
  messages: [
    { role: "user", content: "hi" },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: args } }],
    },
    { role: "tool", tool_call_id: "c1", content: result },
  ],
});
const responsesCall = (args: string, output = "done") => ({
  model: "smart",
  input: [
    { role: "user", content: "hi" },
    { type: "function_call", call_id: "c1", name: "f", arguments: args },
    { type: "function_call_output", call_id: "c1", output },
  ],
});
const anthropicResult = (content: string, metadata?: Record<string, unknown>) => ({
  model: "smart",
  max_tokens: 5,
  ...(metadata ? { metadata } : {}),
  messages: [
    { role: "user", content: "hi" },
    { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "f", input: {} }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content }] },
  ],
});

/** Where a client's JSON text sits inside its body, per format; each nests 200 deep. */
const DEEP_TEXTS: { name: string; path: string; body: unknown; what: RegExp }[] = [
  {
    name: "Chat tool-call arguments",
    path: "/v1/chat/completions",
    body: chatCall(`{"a":${nested(200)}}`),
    what: /arguments of tool call 'c1'/,
  },
  {
    name: "Chat tool result",
    path: "/v1/chat/completions",
    body: chatCall("{}", nested(200)),
    what: /result of tool call 'c1'/,
  },
  {
    name: "Responses function_call arguments",
    path: "/v1/responses",
    body: responsesCall(`{"a":${nested(200)}}`),
    what: /arguments of tool call 'c1'/,
  },
  {
    name: "Responses function_call_output",
    path: "/v1/responses",
    body: responsesCall("{}", ` ${nested(200)}`),
    what: /result of tool call 'c1'/,
  },
  {
    name: "Anthropic tool_result",
    path: "/v1/messages",
    body: anthropicResult(`{"rows":${nested(200)}}`),
    what: /result of tool call 't1'/,
  },
  {
    name: "Anthropic metadata.user_id",
    path: "/v1/messages",
    body: anthropicResult("done", { user_id: `{"session_id":${nested(200)}}` }),
    what: /metadata\.user_id/,
  },
];

Deno.test("JSON texts inside a body (tool arguments and results) nested 200 deep: 400, recorded, never sent on", async () => {
  const calls = await withGateway(async (gw) => {
    for (const deep of DEEP_TEXTS) {
      const res = await postJson(`${gw.url}${deep.path}`, deep.body);
      const body = await res.json();
      assert.equal(res.status, 400, `${deep.name}: ${JSON.stringify(body)}`);
      assert.equal(res.headers.get("x-pulsegate-error-code"), "gw.client.invalid_json", deep.name);
      const message = String(body.error.message);
      assert.match(message, new RegExp(`nests deeper than ${MAX_JSON_DEPTH} levels`), deep.name);
      assert.match(message, deep.what, deep.name);
      const { request } = await gw.row(res.headers.get("x-request-id")!);
      assert.equal(request.status, 400, deep.name);
      assert.equal(request.errorCode, "gw.client.invalid_json", deep.name);
    }
    // The same texts within the limit are taken: a tool result that is not JSON, and JSON at
    // the depth a body may have.
    const fine = chatCall(`{"a":${nested(MAX_JSON_DEPTH - 1)}}`, "[[[ not json");
    const res = await postJson(`${gw.url}/v1/chat/completions`, fine);
    assert.equal(res.status, 200);
    await res.body?.cancel();
  });
  assert.equal(calls, 1, "only the request within the limits reached the upstream");
});

Deno.test("a body and the JSON texts inside it hold at most MAX_JSON_VALUES values together", async () => {
  const zeros = (n: number) => `[${"0,".repeat(n - 1)}0]`;
  const calls = await withGateway(async (gw) => {
    // A wide body: a million small values in a field nobody reads.
    const wide = `{"model":"smart","messages":[],"x":${zeros(MAX_JSON_VALUES)}}`;
    const refused = await postJson(`${gw.url}/v1/chat/completions`, wide);
    const body = await refused.json();
    assert.equal(refused.status, 400);
    assert.equal(refused.headers.get("x-pulsegate-error-code"), "gw.client.invalid_json");
    assert.match(body.error.message, /request body holds more than 1000000 JSON values/);
    assert.equal((await gw.row(refused.headers.get("x-request-id")!)).request.status, 400);
    // Two tool calls, each under the limit alone, over it together.
    const half = zeros(MAX_JSON_VALUES / 2 + 10);
    const twice = {
      model: "smart",
      messages: [
        { role: "user", content: "hi" },
        {
          role: "assistant",
          tool_calls: ["c1", "c2"].map((id) => ({
            id,
            type: "function",
            function: { name: "f", arguments: `{"a":${half}}` },
          })),
        },
      ],
    };
    const over = await postJson(`${gw.url}/v1/chat/completions`, twice);
    assert.equal(over.status, 400);
    assert.match((await over.json()).error.message, /arguments of tool call 'c2' holds more/);
    // Just under the limit is taken.
    const under = `{"model":"smart","messages":[],"x":${zeros(MAX_JSON_VALUES - 100)}}`;
    const taken = await postJson(`${gw.url}/v1/chat/completions`, under);
    assert.equal(taken.status, 200);
    await taken.body?.cancel();
  });
  assert.equal(calls, 1);
});

Deno.test("tool-call arguments are parsed once per request, whatever the hops and their models", async () => {
  const args = JSON.stringify({ city: "Paris", days: [1, 2, 3] });
  const ir = chatClient.parseRequest(chatCall(args), {});
  const parse = JSON.parse;
  let parsed = 0;
  JSON.parse = ((text: string, reviver?: Parameters<typeof parse>[1]) => {
    if (text === args) parsed++;
    return parse(text, reviver);
  }) as typeof JSON.parse;
  try {
    const anthropic = await bodiesOf(anthropicUpstream, { ir }, ["c1", "c2", "c3"]);
    await bodiesOf(geminiUpstream, { ir }, ["g1", "g2"]);
    assert.deepEqual(
      (anthropic[2]!.messages as { content: { input?: unknown }[] }[])[1]!.content[0]!.input,
      { city: "Paris", days: [1, 2, 3] },
    );
  } finally {
    JSON.parse = parse;
  }
  assert.equal(parsed, 1);
});

// --- serialised once per request ---------------------------------------------

/** A value that counts how often JSON.stringify writes it. */
function counted(): { value: object; count: () => number } {
  let n = 0;
  return { value: { toJSON: () => (n++, "counted") }, count: () => n };
}

function configFor(kind: "openai-chat" | "anthropic" | "gemini"): Config {
  const result = validateConfig({
    upstreams: [{ id: "a", kind, base_url: "http://127.0.0.1:9" }],
    routes: [{ model: "smart", candidates: [{ upstream: "a", model: "m" }] }],
  });
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result.config;
}

async function bodiesOf(
  adapter: UpstreamAdapter,
  opts: { passthrough?: Record<string, unknown>; ir: ReturnType<typeof chatClient.parseRequest> },
  models: string[],
): Promise<Record<string, unknown>[]> {
  const config = configFor(adapter.kind as "openai-chat" | "anthropic" | "gemini");
  const out = [];
  for (const model of models) {
    const request = await adapter.buildRequest({
      ir: opts.ir,
      passthrough: opts.passthrough,
      upstream: config.upstreams[0]!,
      model,
      env: () => undefined,
      config,
    });
    out.push(await request.json());
  }
  return out;
}

Deno.test("a passed-through body is serialised once per request, whatever the hops' models", async () => {
  const extra = counted();
  const body = {
    model: "smart",
    messages: [{ role: "user", content: 'say "model"' }],
    extra: extra.value,
  };
  const ir = chatClient.parseRequest(body, {});
  const sent = await bodiesOf(chatUpstream, { passthrough: body, ir }, ["m1", "m2", "m1"]);
  assert.equal(extra.count(), 1);
  assert.deepEqual(sent.map((b) => b.model), ["m1", "m2", "m1"]);
  for (const b of sent) {
    assert.deepEqual({ ...b, model: "smart" }, { ...body, extra: "counted" });
  }
  // Gemini names the model in the URL: its pass-through body is the client's, also once.
  const gemini = counted();
  const geminiBody = { contents: [{ parts: [{ text: "hi" }] }], extra: gemini.value };
  await bodiesOf(geminiUpstream, { passthrough: geminiBody, ir }, ["g1", "g2"]);
  assert.equal(gemini.count(), 1);
});

Deno.test("a translated body is built once per request for each target kind and model", async () => {
  const schema = counted();
  const body = {
    model: "smart",
    messages: [{ role: "user", content: "hi" }],
    tools: [{ type: "function", function: { name: "f", parameters: schema.value } }],
  };
  const ir = chatClient.parseRequest(body, {});
  const before = schema.count();
  const sent = await bodiesOf(anthropicUpstream, { ir }, ["c1", "c1", "c1"]);
  assert.equal(schema.count() - before, 1);
  assert.deepEqual(sent[2], sent[0]);
  await bodiesOf(anthropicUpstream, { ir }, ["c2"]);
  assert.equal(schema.count() - before, 2);
});
