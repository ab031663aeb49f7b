/**
 * An upstream's own 4xx keeps its meaning in every client format (docs/design.md "Client API"):
 * byte for byte when the client speaks the upstream's format, its type/code
 * mapped into the client's words otherwise, and the gateway's code in
 * `x-pulsegate-error-code`. Every client format against every provider error
 * of the table, with the official SDKs as clients; then the same errors after
 * early streaming headers, where they end the stream as its error event. A whole gateway in
 * virtual time (tests/virtual_gateway.ts): the opening hold answers at its 15 s exactly, and
 * the late error ends the stream at the instant the upstream sends it.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { ApiError, GoogleGenAI } from "@google/genai";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import type { UpstreamKind } from "../../gateway/formats/format.ts";
import { isRecord, parseJson } from "../../gateway/runtime/json.ts";
import { SseDecoderStream } from "../../gateway/formats/sse_stream.ts";
import { startVirtualGateway, type VirtualGateway } from "../virtual_gateway.ts";
import type { Call, Script } from "../fake_upstreams/server.ts";
import { openAiErrorBody } from "../fake_upstreams/openai_chat_script.ts";
import * as anthropicFake from "../fake_upstreams/anthropic_script.ts";
import * as geminiFake from "../fake_upstreams/gemini_script.ts";
import * as bedrockFake from "../fake_upstreams/bedrock_script.ts";
import * as interactionsFake from "../fake_upstreams/interactions_script.ts";
import { OPENING_HOLD_MS } from "../../gateway/forward/stream_forward.ts";
import { CLIENT_CODECS, UPSTREAM_ADAPTERS } from "../../gateway/formats/formats.ts";
import { idleTimeout } from "../../gateway/forward/stop_reasons.ts";

type Vocab = "openai" | "anthropic" | "gemini";
type ClientFormat =
  | "openai-chat"
  | "openai-responses"
  | "anthropic"
  | "gemini"
  | "gemini-interactions";

/** What a client read: OpenAI type/code/param; Anthropic type; Gemini status (as `type`). */
interface Words {
  type: string | null;
  code?: string | null;
  param?: string | null;
}

interface ProviderError {
  id: string;
  /** The upstream kinds that answer with this error. */
  kinds: UpstreamKind[];
  message: string;
  body: string;
  headers: Record<string, string>;
  /** What a client of each vocabulary must read. */
  expect: Record<Vocab, Words>;
}

const INVALID = {
  anthropic: { type: "invalid_request_error" },
  gemini: { type: "INVALID_ARGUMENT" },
};
const REJECTED = "gw.upstream.rejected";

const CONTEXT_MESSAGE = "This model's maximum context length is 128000 tokens. However, your " +
  "messages resulted in 130412 tokens. Please reduce the length of the messages.";
const POLICY_MESSAGE = "Your request was rejected as a result of our safety system.";
const TOO_LONG_MESSAGE = "prompt is too long: 215000 tokens > 200000 maximum";
const GEMINI_MESSAGE = "* GenerateContentRequest.generation_config.max_output_tokens: must be > 0";
const BEDROCK_MESSAGE = "Malformed input request: #: extraneous key [foo] is not permitted";
const INTERACTIONS_MESSAGE =
  "Invalid value at 'generation_config.temperature' (TYPE_FLOAT), \"hot\"";

const ERRORS: ProviderError[] = [
  {
    id: "context-length",
    kinds: ["openai-chat", "openai-responses"],
    message: CONTEXT_MESSAGE,
    body: openAiErrorBody({
      message: CONTEXT_MESSAGE,
      type: "invalid_request_error",
      param: "messages",
      code: "context_length_exceeded",
    }),
    headers: { "content-type": "application/json; charset=utf-8" },
    expect: {
      openai: { type: "invalid_request_error", code: "context_length_exceeded", param: "messages" },
      ...INVALID,
    },
  },
  {
    id: "content-policy",
    kinds: ["openai-chat", "openai-responses"],
    message: POLICY_MESSAGE,
    body: openAiErrorBody({
      message: POLICY_MESSAGE,
      type: "invalid_request_error",
      code: "content_policy_violation",
    }),
    headers: { "content-type": "application/json; charset=utf-8" },
    expect: {
      openai: { type: "invalid_request_error", code: "content_policy_violation", param: null },
      ...INVALID,
    },
  },
  {
    // Anthropic says "too long" only in the message; an OpenAI client still reads the code.
    id: "prompt-too-long",
    kinds: ["anthropic"],
    message: TOO_LONG_MESSAGE,
    body: anthropicFake.errorBody(400, TOO_LONG_MESSAGE),
    headers: { "content-type": "application/json" },
    expect: {
      openai: { type: "invalid_request_error", code: "context_length_exceeded", param: null },
      ...INVALID,
    },
  },
  {
    id: "invalid-argument",
    kinds: ["gemini"],
    message: GEMINI_MESSAGE,
    body: geminiFake.errorBody(400, GEMINI_MESSAGE),
    headers: { "content-type": "application/json; charset=UTF-8" },
    // No provider code: the gateway's code stays in OpenAI's `code`.
    expect: { openai: { type: "invalid_request_error", code: REJECTED, param: null }, ...INVALID },
  },
  {
    // Bedrock names the exception only in a header.
    id: "validation",
    kinds: ["bedrock"],
    message: BEDROCK_MESSAGE,
    body: bedrockFake.errorBody(400, BEDROCK_MESSAGE),
    headers: bedrockFake.errorHeaders(400),
    expect: { openai: { type: "invalid_request_error", code: REJECTED, param: null }, ...INVALID },
  },
  {
    // The Interactions API answers Google's google.rpc object, as generateContent does.
    id: "interactions-invalid",
    kinds: ["gemini-interactions"],
    message: INTERACTIONS_MESSAGE,
    body: interactionsFake.errorBody(400, INTERACTIONS_MESSAGE),
    headers: { "content-type": "application/json; charset=UTF-8" },
    expect: { openai: { type: "invalid_request_error", code: REJECTED, param: null }, ...INVALID },
  },
];

const AWS = { AWS_AK: "AKIDEXAMPLE", AWS_SK: "test-secret" };

/** Streamed calls get their error 5 s after the opening hold (15 s) sent 200 and the headers. */
const LATE_MS = OPENING_HOLD_MS + 5_000;

const isStreamCall = (call: Call) =>
  call.path.includes(":streamGenerateContent") || call.path.endsWith("/converse-stream") ||
  (call.json as { stream?: boolean } | undefined)?.stream === true;

function routeId(error: ProviderError, kind: UpstreamKind): string {
  return `${error.id}.${kind}`;
}

/** One upstream and one route per provider error and kind that sends it. */
function gatewayConfig(urls: Map<string, string>): ConfigInput {
  const upstreams: ConfigInput["upstreams"] = [];
  for (const error of ERRORS) {
    for (const kind of error.kinds) {
      const id = routeId(error, kind);
      const base_url = urls.get(id)!;
      upstreams.push(
        kind === "bedrock"
          ? {
            id,
            kind,
            base_url,
            region: "us-east-1",
            access_key_env: "AWS_AK",
            secret_key_env: "AWS_SK",
          }
          : { id, kind, base_url },
      );
    }
  }
  return {
    upstreams,
    routes: upstreams.map((u) => ({
      model: u.id,
      candidates: [{ upstream: u.id, model: "up-model" }],
    })),
  };
}

interface ClientCase {
  vocab: Vocab;
  /** The raw HTTP request, to see status, headers and bytes. */
  fetch(v: VirtualGateway, opts: { model: string; stream: boolean }): Promise<Response>;
  /** The same request through the official SDK: what it threw, as words. */
  sdk(v: VirtualGateway, opts: { model: string; stream: boolean }): Promise<SdkOutcome>;
}

interface SdkOutcome {
  words: Words;
  /** HTTP status the SDK saw; undefined for an error met inside a stream. */
  status: number | undefined;
  /** Anthropic's `errorCode` (the gateway code in `details`). */
  errorCode?: string | null;
}

async function thrownBy(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
  } catch (err) {
    return err;
  }
  throw new Error("the SDK call succeeded; an error was expected");
}

async function drain(iterable: AsyncIterable<unknown>): Promise<void> {
  for await (const _ of iterable) { /* the error surfaces while iterating */ }
}

/** A JSON POST to the gateway's handler. */
function post(v: VirtualGateway, path: string, body: unknown): Promise<Response> {
  return v.fetch(`${v.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

const openai = (v: VirtualGateway) =>
  new OpenAI({ baseURL: `${v.url}/v1`, apiKey: "unused", maxRetries: 0, fetch: v.fetch });

function openAiOutcome(err: unknown): SdkOutcome {
  assert.ok(err instanceof OpenAI.APIError, String(err));
  return {
    status: err.status as number | undefined,
    words: { type: err.type ?? null, code: err.code ?? null, param: err.param ?? null },
  };
}

const interactionsCase: ClientCase = {
  vocab: "gemini",
  fetch: (v, { model, stream }) => post(v, `/v1beta/interactions`, { model, stream, input: "hi" }),
  sdk: async (v, { model, stream }) => {
    const ai = new GoogleGenAI({
      apiKey: "unused",
      httpOptions: { baseUrl: v.url, fetch: v.fetch },
    });
    if (stream) {
      // The SDK hands an `error` event to the caller as an event, as Google documents it.
      for await (const event of await ai.interactions.create({ model, input: "hi", stream })) {
        if (event.event_type !== "error") continue;
        const status = (event.error as { status?: string } | undefined)?.status ?? null;
        return { status: undefined, words: { type: status } };
      }
      throw new Error("the stream ended without an error event");
    }
    const err = await thrownBy(() =>
      ai.interactions.create({ model, input: "hi" }, { maxRetries: 0 })
    );
    const { status, error } = err as { status?: number; error?: { error?: { status?: string } } };
    return { status, words: { type: error?.error?.status ?? null } };
  },
};

const CLIENTS: Record<ClientFormat, ClientCase> = {
  "openai-chat": {
    vocab: "openai",
    fetch: (v, { model, stream }) =>
      post(v, `/v1/chat/completions`, {
        model,
        stream,
        messages: [{ role: "user", content: "hi" }],
      }),
    sdk: async (v, { model, stream }) => {
      const body = { model, messages: [{ role: "user" as const, content: "hi" }] };
      const chat = openai(v).chat.completions;
      return openAiOutcome(
        await thrownBy(async () =>
          stream ? drain(await chat.create({ ...body, stream: true })) : chat.create(body)
        ),
      );
    },
  },
  "openai-responses": {
    vocab: "openai",
    fetch: (v, { model, stream }) => post(v, `/v1/responses`, { model, stream, input: "hi" }),
    sdk: async (v, { model, stream }) => {
      const responses = openai(v).responses;
      return openAiOutcome(
        await thrownBy(async () =>
          stream
            ? drain(await responses.create({ model, input: "hi", stream: true }))
            : responses.create({ model, input: "hi" })
        ),
      );
    },
  },
  "anthropic": {
    vocab: "anthropic",
    fetch: (v, { model, stream }) =>
      post(v, `/v1/messages`, {
        model,
        stream,
        max_tokens: 64,
        messages: [{ role: "user", content: "hi" }],
      }),
    sdk: async (v, { model, stream }) => {
      const client = new Anthropic({
        baseURL: v.url,
        apiKey: "unused",
        maxRetries: 0,
        fetch: v.fetch,
      });
      const body = {
        model,
        max_tokens: 64,
        messages: [{ role: "user" as const, content: "hi" }],
      };
      const err = await thrownBy(async () =>
        stream
          ? drain(await client.messages.create({ ...body, stream: true }))
          : client.messages.create(body)
      );
      assert.ok(err instanceof Anthropic.APIError, String(err));
      return {
        status: err.status as number | undefined,
        words: { type: err.type },
        errorCode: err.errorCode,
      };
    },
  },
  "gemini": {
    vocab: "gemini",
    fetch: (v, { model, stream }) =>
      post(
        v,
        `/v1beta/models/${model}:${stream ? "streamGenerateContent?alt=sse" : "generateContent"}`,
        { contents: [{ role: "user", parts: [{ text: "hi" }] }] },
      ),
    sdk: async (v, { model, stream }) => {
      const ai = new GoogleGenAI({
        apiKey: "unused",
        httpOptions: { baseUrl: v.url, apiVersion: "v1beta", fetch: v.fetch },
      });
      const request = { model, contents: "hi" };
      const err = await thrownBy(async () =>
        stream
          ? drain(await ai.models.generateContentStream(request))
          : ai.models.generateContent(request)
      );
      assert.ok(err instanceof ApiError, String(err));
      // The SDK raises the error body (whole) or chunk (streamed) as JSON text in its message.
      const status = /"status":"([A-Z_]+)"/.exec(err.message)?.[1] ?? null;
      return { status: err.status, words: { type: status } };
    },
  },
  "gemini-interactions": interactionsCase,
};

/** The words of an error object in the client's vocabulary. */
function wordsOf(vocab: Vocab, error: Record<string, unknown>): Words {
  if (vocab === "openai") {
    return {
      type: error.type as string,
      code: error.code as string | null,
      param: error.param as string | null,
    };
  }
  return { type: (vocab === "anthropic" ? error.type : error.status) as string };
}

/**
 * The first error object a streamed answer carried (`{error: {...}}` in every
 * format; Gemini's is a bare JSON object, without `data:`, as Google sends it).
 */
async function streamedError(res: Response): Promise<Record<string, unknown>> {
  for await (const event of res.body!.pipeThrough(new SseDecoderStream())) {
    const data = parseJson(event.data ?? event.raw.trim());
    if (isRecord(data) && isRecord(data.error)) return data.error;
  }
  throw new Error("the stream ended without an error event");
}

const cases: Case[] = Object.entries(CLIENTS).flatMap(([format, client]) =>
  ERRORS.flatMap((error) =>
    error.kinds.map((kind) => ({ format: format as ClientFormat, client, error, kind }))
  )
);

/** After early headers, per client: its own format and one other kind (Bedrock's once). */
const LATE: Record<ClientFormat, [string, UpstreamKind][]> = {
  "openai-chat": [["context-length", "openai-chat"], ["prompt-too-long", "anthropic"]],
  "openai-responses": [["content-policy", "openai-responses"], ["invalid-argument", "gemini"]],
  "anthropic": [["prompt-too-long", "anthropic"], ["context-length", "openai-chat"]],
  "gemini": [["invalid-argument", "gemini"], ["validation", "bedrock"]],
  "gemini-interactions": [
    ["interactions-invalid", "gemini-interactions"],
    ["context-length", "openai-chat"],
  ],
};

const lateCases: Case[] = (Object.entries(LATE) as [ClientFormat, [string, UpstreamKind][]][])
  .flatMap(([format, rows]) =>
    rows.map(([id, kind]) => ({
      format,
      client: CLIENTS[format],
      error: ERRORS.find((e) => e.id === id)!,
      kind,
    }))
  );

Deno.test("upstream 4xx errors keep the provider's meaning in every client format", async (t) => {
  const ids = ERRORS.flatMap((error) => error.kinds.map((kind) => routeId(error, kind)));
  await using v = await startVirtualGateway({
    upstreams: ids.length,
    config: (urls) => gatewayConfig(new Map(ids.map((id, i) => [id, urls[i]!]))),
    env: AWS,
    cryptoHoldsTime: true,
  });
  for (const [i, id] of ids.entries()) {
    const error = ERRORS.find((e) => id === routeId(e, id.slice(e.id.length + 1) as UpstreamKind))!;
    v.ups[i]!.setHandler(answerOf(error));
  }
  // Each case's client hangs up at its end, as a process closing its connections: an SDK that
  // stops at a stream's error event leaves the rest unread.
  const asClient = (run: (client: VirtualGateway) => Promise<void>) => async () => {
    const client = v.client();
    await v.run(run({ ...v, fetch: client.fetch }));
    client.hangUp();
    // Until every request has ended. Not an instant under test: a Gemini client's final error is
    // repeated 250 ms of real time after the first (gateway/forward/client_channel.ts), and
    // virtual time runs on meanwhile.
    await v.run((async () => {
      while (v.gw.registry.all().length) await v.clock.sleep(1);
    })());
  };
  for (const c of cases) await t.step(wholeName(c), asClient((client) => wholeCase(client, c)));
  for (const c of lateCases) {
    await t.step(lateName(c), asClient((client) => lateCase(client, c)));
  }
});

interface Case {
  format: ClientFormat;
  client: ClientCase;
  error: ProviderError;
  kind: UpstreamKind;
}

const wholeName = ({ format, error, kind }: Case) =>
  `${format} client ← ${kind} ${error.id}${format === kind ? " (same format)" : ""}`;

/** A whole answer: an HTTP error status in the client's format, or the upstream's own bytes. */
async function wholeCase(v: VirtualGateway, { format, client, error, kind }: Case): Promise<void> {
  const same = format === kind;
  const model = routeId(error, kind);
  const expected = error.expect[client.vocab];
  const sentAt = v.clock.sinceStart;
  const res = await client.fetch(v, { model, stream: false });
  const text = await res.text();
  assert.equal(v.clock.sinceStart, sentAt, "the refusal is passed on at once");
  assert.equal(res.status, 400, text);
  assert.equal(res.headers.get("x-pulsegate-error"), "client");
  assert.equal(res.headers.get("x-pulsegate-error-code"), REJECTED);
  if (same) {
    assert.equal(text, error.body);
    assert.equal(res.headers.get("content-type"), error.headers["content-type"]);
  } else {
    assert.equal(res.headers.get("content-type"), "application/json");
    const body = JSON.parse(text);
    assert.deepEqual(wordsOf(client.vocab, body.error), expected);
    assert.ok(body.error.message.startsWith(error.message), body.error.message);
    if (client.vocab === "anthropic") assert.equal(body.error.details.error_code, REJECTED);
    if (client.vocab === "gemini") {
      assert.equal(body.error.code, 400);
      assert.equal(body.error.details[0].reason, REJECTED);
    }
  }
  const sdk = await client.sdk(v, { model, stream: false });
  assert.equal(sdk.status, 400);
  assert.deepEqual(sdk.words, expected);
  // Anthropic's own body has no gateway code; a translated one carries it in `details`.
  if (client.vocab === "anthropic") assert.equal(sdk.errorCode, same ? null : REJECTED);
}

const lateName = ({ format, error, kind }: Case) =>
  `${format} client ← ${kind} ${error.id}, after early streaming headers`;

/** The error comes after the opening hold sent 200: it ends the stream as its error event. */
async function lateCase(v: VirtualGateway, { format, client, error, kind }: Case): Promise<void> {
  const model = routeId(error, kind);
  const expected = error.expect[client.vocab];
  const sentAt = v.clock.sinceStart;
  const res = await client.fetch(v, { model, stream: true });
  assert.equal(v.clock.sinceStart - sentAt, OPENING_HOLD_MS, "the hold's 200 at 15 s");
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
  const streamed = await streamedError(res);
  assert.equal(v.clock.sinceStart - sentAt, LATE_MS, "the error at the instant it came");
  assert.deepEqual(wordsOf(client.vocab, streamed), expected);
  assert.ok(String(streamed.message).startsWith(error.message), String(streamed.message));
  const sdk = await client.sdk(v, { model, stream: true });
  // OpenAI and Anthropic SDKs raise an in-stream error without a status; Google's takes the
  // error chunk's code.
  assert.equal(sdk.status, format === "gemini" ? 400 : undefined);
  assert.deepEqual(sdk.words, expected);
}

/** A provider error's upstream: its refusal, late (after the hold) to a streamed call. */
function answerOf(error: ProviderError): (call: Call) => Script {
  const answer: Script = { status: 400, headers: error.headers, body: [{ send: error.body }] };
  return (call) => (isStreamCall(call) ? { ...answer, headerDelay: LATE_MS } : answer);
}

// ---------------------------------------------------------------- the table's edges, unit

/** Each client format's words for an error, read from its rendered body. */
function rendered(err: Parameters<typeof CLIENT_CODECS.chat.renderError>[0]) {
  const chat = CLIENT_CODECS.chat.renderError(err) as { error: Record<string, unknown> };
  const anthropic = CLIENT_CODECS.anthropic.renderError(err) as { error: Record<string, unknown> };
  const gemini = CLIENT_CODECS.gemini.renderError(err) as { error: Record<string, unknown> };
  return {
    openai: wordsOf("openai", chat.error),
    anthropic: wordsOf("anthropic", anthropic.error),
    gemini: wordsOf("gemini", gemini.error),
    anthropicDetails: anthropic.error.details,
  };
}

Deno.test("our own timeouts read as timeouts in every format, whatever timeout_status", () => {
  const err = idleTimeout("a", { secs: 30, midStream: false, timeoutStatus: 503 });
  const words = rendered(err);
  assert.deepEqual(words.openai, { type: "timeout_error", code: err.code, param: null });
  assert.deepEqual(words.anthropic, { type: "timeout_error" });
  assert.deepEqual(words.gemini, { type: "DEADLINE_EXCEEDED" });
});

Deno.test("an upstream's words for a failure charged to it stay out of the caller's error", () => {
  const rateLimited = UPSTREAM_ADAPTERS["openai-chat"].decodeError(
    429,
    openAiErrorBody({ message: "slow", type: "requests", code: "rate_limit_exceeded" }),
  );
  assert.deepEqual(rendered(rateLimited).openai, {
    type: "rate_limit_error",
    code: "gw.upstream.rate_limited",
    param: null,
  });
  // Our credential refused: the caller's key is fine, so no authentication_error reaches it.
  const refused = UPSTREAM_ADAPTERS.anthropic.decodeError(401, anthropicFake.errorBody(401, "no"));
  const words = rendered(refused);
  assert.deepEqual(words.openai, { type: "server_error", code: refused.code, param: null });
  assert.deepEqual(words.anthropic, { type: "api_error" });
  assert.deepEqual(words.gemini, { type: "UNAVAILABLE" });
});

Deno.test("a translated provider error keeps its own words in the formats' detail fields", () => {
  const err = UPSTREAM_ADAPTERS["openai-chat"].decodeError(400, ERRORS[0]!.body);
  assert.deepEqual(rendered(err).anthropicDetails, {
    error_code: REJECTED,
    upstream_type: "invalid_request_error",
    upstream_code: "context_length_exceeded",
  });
  const gemini = CLIENT_CODECS.gemini.renderError(err) as {
    error: { details: Record<string, unknown>[] };
  };
  assert.deepEqual(gemini.error.details[0]?.metadata, {
    source: "client",
    upstream_type: "invalid_request_error",
    upstream_code: "context_length_exceeded",
  });
  // OpenAI's param becomes Google's field violation.
  assert.equal(
    (gemini.error.details[1]?.fieldViolations as { field: string }[])[0]?.field,
    "messages",
  );
});

Deno.test("Gemini statuses without an OpenAI code map by meaning, the gateway code kept", () => {
  const body = JSON.stringify({
    error: { code: 400, message: "billing is not enabled", status: "FAILED_PRECONDITION" },
  });
  const err = UPSTREAM_ADAPTERS.gemini.decodeError(400, body);
  const words = rendered(err);
  assert.deepEqual(words.openai, { type: "invalid_request_error", code: REJECTED, param: null });
  assert.deepEqual(words.anthropic, { type: "invalid_request_error" });
  assert.deepEqual(words.gemini, { type: "FAILED_PRECONDITION" });
});
