/**
 * `on_context_overflow: "next"` (docs/liveness.md): each provider's real
 * context-length refusal (tests/fixtures/context_overflow/) is recognised; the
 * request moves to the next candidate with a larger `context_window`, never to
 * one that is smaller, equal or unknown, never twice to the same upstream and
 * model; with none left the provider's own error reaches the client. The
 * official SDKs are the clients, of a whole gateway in virtual time
 * (tests/virtual_gateway.ts): a refusal moves on at the instant it comes.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import type { UpstreamKind } from "../../gateway/formats/format.ts";
import { UPSTREAM_ADAPTERS } from "../../gateway/formats/formats.ts";
import { isContextOverflow } from "../../gateway/formats/context_overflow.ts";
import { startVirtualGateway, type VirtualGateway } from "../virtual_gateway.ts";
import type { FakeUpstream, Handler, Script } from "../fake_upstreams/server.ts";
import { chatStream, chatWhole } from "../fake_upstreams/openai_chat_script.ts";

interface Fixture {
  source: string;
  kind: UpstreamKind;
  overflow: boolean;
  status: number;
  headers: Record<string, string>;
  body: string;
}

const FIXTURE_DIR = new URL("../fixtures/context_overflow/", import.meta.url);

function fixture(name: string): Fixture {
  return JSON.parse(Deno.readTextFileSync(new URL(`${name}.json`, FIXTURE_DIR)));
}

const refusal = (f: Fixture): Script => ({
  status: f.status,
  headers: f.headers,
  body: [{ send: f.body }],
});

Deno.test("every recorded provider refusal is read as a context overflow, and nothing else is", () => {
  const names = [...Deno.readDirSync(FIXTURE_DIR)].filter((e) => e.name.endsWith(".json"))
    .map((e) => e.name.replace(/\.json$/, ""));
  assert.ok(names.length >= 10);
  for (const name of names.sort()) {
    const f = fixture(name);
    const err = UPSTREAM_ADAPTERS[f.kind].decodeError(f.status, f.body, {
      headers: new Headers(f.headers),
    });
    assert.equal(isContextOverflow(err), f.overflow, name);
  }
});

const AWS = { AWS_AK: "AKIDEXAMPLE", AWS_SK: "test-secret" };

function upstream(id: string, kind: UpstreamKind, url: string): ConfigInput["upstreams"][number] {
  return kind === "bedrock"
    ? {
      id,
      kind,
      base_url: url,
      region: "us-east-1",
      access_key_env: "AWS_AK",
      secret_key_env: "AWS_SK",
    }
    : { id, kind, base_url: url };
}

/** What a client of one format asks, and the text it reads back. */
type Ask = (v: VirtualGateway, opts: { stream: boolean; id: string }) => Promise<string>;

const PROMPT = "a very long conversation";

const openai = (v: VirtualGateway) =>
  new OpenAI({ baseURL: `${v.url}/v1`, apiKey: "unused", maxRetries: 0, fetch: v.fetch });

const askOpenAi: Ask = async (v, { stream, id }) => {
  const client = openai(v);
  const messages = [{ role: "user" as const, content: PROMPT }];
  const headers = { "x-request-id": id };
  if (!stream) {
    const res = await client.chat.completions.create({ model: "smart", messages }, { headers });
    return res.choices[0]?.message.content ?? "";
  }
  const chunks = await client.chat.completions.create(
    { model: "smart", messages, stream: true },
    { headers },
  );
  let text = "";
  for await (const chunk of chunks) text += chunk.choices[0]?.delta.content ?? "";
  return text;
};

const askAnthropic: Ask = async (v, { stream, id }) => {
  const client = new Anthropic({ baseURL: v.url, apiKey: "unused", maxRetries: 0, fetch: v.fetch });
  const body = {
    model: "smart",
    max_tokens: 50,
    messages: [{ role: "user" as const, content: PROMPT }],
  };
  const headers = { "x-request-id": id };
  const msg = stream
    ? await client.messages.stream(body, { headers }).finalMessage()
    : await client.messages.create(body, { headers });
  return msg.content.map((b) => (b.type === "text" ? b.text : "")).join("");
};

const askGemini: Ask = async (v, { stream, id }) => {
  const client = new GoogleGenAI({
    apiKey: "unused",
    httpOptions: {
      baseUrl: v.url,
      apiVersion: "v1beta",
      headers: { "x-request-id": id },
      fetch: v.fetch,
    },
  });
  const params = { model: "smart", contents: PROMPT };
  if (!stream) return (await client.models.generateContent(params)).text ?? "";
  let text = "";
  for await (const chunk of await client.models.generateContentStream(params)) {
    text += chunk.text ?? "";
  }
  return text;
};

/** Per upstream kind: a real refusal, and the official client of its format (Bedrock has none). */
const KINDS: Array<{ kind: UpstreamKind; fixture: string; ask: Ask }> = [
  { kind: "openai-chat", fixture: "openai_chat_context_length_exceeded", ask: askOpenAi },
  { kind: "anthropic", fixture: "anthropic_prompt_too_long", ask: askAnthropic },
  { kind: "gemini", fixture: "gemini_input_token_count", ask: askGemini },
  { kind: "bedrock", fixture: "bedrock_input_too_long", ask: askOpenAi },
];

interface Fakes {
  small: FakeUpstream;
  same: FakeUpstream;
  unknown: FakeUpstream;
  big: FakeUpstream;
}

/**
 * A gateway in virtual time over four in-process fakes: `small` refuses with `refusal`, the
 * others answer "from big". `run` runs in virtual time.
 */
async function withFakes(
  refusal: Script,
  opts: {
    config: (urls: Record<keyof Fakes, string>) => ConfigInput;
    env?: Record<string, string>;
  },
  run: (fakes: Fakes, v: VirtualGateway) => Promise<void>,
): Promise<void> {
  const answer: Handler = (call) =>
    (call.json as { stream?: boolean }).stream
      ? chatStream({ text: ["from ", "big"] })
      : chatWhole({ text: ["from big"] });
  await using v = await startVirtualGateway({
    upstreams: 4,
    config: ([small, same, unknown, big]) =>
      opts.config({ small: small!, same: same!, unknown: unknown!, big: big! }),
    env: opts.env,
    cryptoHoldsTime: true,
  });
  const [small, same, unknown, big] = v.ups as [
    FakeUpstream,
    FakeUpstream,
    FakeUpstream,
    FakeUpstream,
  ];
  small.setHandler(() => refusal);
  for (const up of [same, unknown, big]) up.setHandler(answer);
  await v.run(run({ small, same, unknown, big }, v));
}

for (const { kind, fixture: name, ask } of KINDS) {
  for (const stream of [false, true]) {
    const mode = stream ? "streamed" : "whole";
    Deno.test(`${kind} refuses the prompt as too long: a larger window answers (${mode})`, async () => {
      const config = (urls: Record<keyof Fakes, string>): ConfigInput => ({
        upstreams: [
          upstream("small", kind, urls.small),
          upstream("same", "openai-chat", urls.same),
          upstream("unknown", "openai-chat", urls.unknown),
          upstream("big", "openai-chat", urls.big),
        ],
        routes: [{
          model: "smart",
          on_context_overflow: "next",
          candidates: [
            { upstream: "small", model: "small-model", context_window: 128_000 },
            { upstream: "same", model: "same-model", context_window: 128_000 },
            { upstream: "unknown", model: "unknown-model" },
            { upstream: "big", model: "big-model", context_window: 1_000_000 },
          ],
        }],
      });
      await withFakes(
        refusal(fixture(name)),
        { config, env: AWS },
        async ({ small, same, unknown, big }, v) => {
          const id = `overflow-${kind}-${mode}`;
          const sentAt = v.clock.sinceStart;
          assert.equal(await ask(v, { stream, id }), "from big");
          assert.equal(v.clock.sinceStart, sentAt, "the larger window answered at once");
          assert.deepEqual(
            [small, same, unknown, big].map((f) => f.calls.length),
            [1, 0, 0, 1],
            "only a larger window is tried after the refusal",
          );
          const { request, attempts } = await v.rowIn(id);
          assert.equal(request.outcome, "success");
          assert.deepEqual(attempts.map((a) => [a.upstream, a.outcome, a.status, a.errorCode]), [
            ["small", "error", 400, "gw.upstream.rejected"],
            ["big", "success", 200, null],
          ]);
          // Refusing a prompt too long for it says nothing about the upstream's health.
          assert.equal(v.gw.cooldowns.get("small").consecutiveFailures, 0);
        },
      );
    });
  }
}

/** The client format whose endpoint speaks each refusing kind's own wire format. */
const SAME_FORMAT: Partial<Record<UpstreamKind, { path: string; body: unknown }>> = {
  "openai-chat": {
    path: "/v1/chat/completions",
    body: { model: "smart", messages: [{ role: "user", content: PROMPT }] },
  },
  "anthropic": {
    path: "/v1/messages",
    body: { model: "smart", max_tokens: 50, messages: [{ role: "user", content: PROMPT }] },
  },
  "gemini": {
    path: "/v1beta/models/smart:generateContent",
    body: { contents: [{ role: "user", parts: [{ text: PROMPT }] }] },
  },
};

for (const { kind, fixture: name } of KINDS) {
  Deno.test(`${kind}: with no larger window left, the provider's refusal is the answer`, async () => {
    const f = fixture(name);
    const config = (urls: Record<keyof Fakes, string>): ConfigInput => ({
      upstreams: [
        upstream("small", kind, urls.small),
        upstream("same", "openai-chat", urls.same),
        upstream("big", "openai-chat", urls.big),
      ],
      routes: [{
        model: "smart",
        on_context_overflow: "next",
        candidates: [
          { upstream: "small", model: "m", context_window: 200_000 },
          { upstream: "big", model: "smaller", context_window: 100_000 },
          { upstream: "same", model: "equal", context_window: 200_000 },
          // The same request to the same upstream again, whatever window the entry claims.
          { upstream: "small", model: "m", context_window: 2_000_000 },
        ],
      }],
    });
    await withFakes(refusal(f), { config, env: AWS }, async ({ small, same, big }, v) => {
      const client = SAME_FORMAT[kind];
      if (client) {
        // Byte for byte when the client speaks the refusing upstream's format (docs/design.md).
        const res = await v.exchange(client.path, client.body);
        assert.equal(res.status, 400);
        assert.equal(res.text, f.body);
        assert.equal(res.endedAt, 0);
      } else {
        // Translated: an OpenAI client still reads OpenAI's code for it.
        const err = await openai(v).chat.completions.create({
          model: "smart",
          messages: [{ role: "user", content: PROMPT }],
        }).then(() => null, (e: unknown) => e);
        assert.ok(err instanceof OpenAI.BadRequestError, String(err));
        assert.equal(err.code, "context_length_exceeded");
      }
      assert.deepEqual([small, big, same].map((u) => u.calls.length), [1, 0, 0]);
    });
  });
}

Deno.test("without on_context_overflow the refusal is the caller's 400, as before", async () => {
  const f = fixture("openai_chat_context_length_exceeded");
  const config = (urls: Record<keyof Fakes, string>): ConfigInput => ({
    upstreams: [
      upstream("small", "openai-chat", urls.small),
      upstream("big", "openai-chat", urls.big),
    ],
    routes: [{
      model: "smart",
      candidates: [
        { upstream: "small", model: "m", context_window: 128_000 },
        { upstream: "big", model: "m", context_window: 1_000_000 },
      ],
    }],
  });
  await withFakes(refusal(f), { config }, async ({ big }, v) => {
    const res = await v.exchange(
      SAME_FORMAT["openai-chat"]!.path,
      SAME_FORMAT["openai-chat"]!.body,
    );
    assert.equal(res.status, 400);
    assert.equal(res.text, f.body);
    assert.equal(big.calls.length, 0);
  });
});

Deno.test("a larger model on the same upstream is a different request, and is tried", async () => {
  const f = fixture("openai_chat_context_length_exceeded");
  await using v = await startVirtualGateway({
    config: ([url]) => ({
      upstreams: [upstream("openai", "openai-chat", url!)],
      routes: [{
        model: "smart",
        on_context_overflow: "next",
        candidates: [
          { upstream: "openai", model: "mini", context_window: 128_000 },
          { upstream: "openai", model: "large", context_window: 1_047_576 },
        ],
      }],
    }),
  });
  const up = v.ups[0]!;
  up.setHandler((call) =>
    (call.json as { model: string }).model === "mini"
      ? refusal(f)
      : chatWhole({ text: ["from large"] })
  );
  assert.equal(
    await v.run(askOpenAi(v, { stream: false, id: "overflow-same-upstream" })),
    "from large",
  );
  assert.deepEqual(up.calls.map((c) => (c.json as { model: string }).model), ["mini", "large"]);
});

Deno.test("a refusal inside a Responses stream, before content, moves on by window too", async () => {
  // OpenAI sends it as an `error` event after `response.created` (dyad-sh/dyad#1672).
  const refused = {
    type: "error",
    sequence_number: 2,
    error: {
      type: "invalid_request_error",
      code: "context_length_exceeded",
      message: "Your input exceeds the context window of this model. Please adjust your input " +
        "and try again.",
      param: "input",
    },
  };
  const created = {
    type: "response.created",
    sequence_number: 0,
    response: { id: "resp_1", object: "response", status: "in_progress", output: [] },
  };
  const inStream: Script = {
    headers: { "content-type": "text/event-stream" },
    body: [
      { send: `event: response.created\ndata: ${JSON.stringify(created)}\n\n` },
      { send: `event: error\ndata: ${JSON.stringify(refused)}\n\n` },
    ],
  };
  const config = (urls: Record<keyof Fakes, string>): ConfigInput => ({
    upstreams: [
      upstream("small", "openai-responses", urls.small),
      upstream("same", "openai-chat", urls.same),
      upstream("unknown", "openai-chat", urls.unknown),
      upstream("big", "openai-chat", urls.big),
    ],
    routes: [{
      model: "smart",
      on_context_overflow: "next",
      candidates: [
        { upstream: "small", model: "gpt-5", context_window: 400_000 },
        { upstream: "same", model: "m", context_window: 400_000 },
        { upstream: "unknown", model: "m" },
        { upstream: "big", model: "m", context_window: 1_000_000 },
      ],
    }],
  });
  await withFakes(inStream, { config }, async ({ small, same, unknown, big }, v) => {
    assert.equal(await askOpenAi(v, { stream: true, id: "overflow-in-stream" }), "from big");
    assert.deepEqual([small, same, unknown, big].map((f) => f.calls.length), [1, 0, 0, 1]);
  });
});
