/**
 * Vertex AI as an upstream of the gemini and anthropic kinds (docs/providers.md "Vertex AI"),
 * end to end: the official SDKs unmodified against the gateway; the gateway against a fake
 * Vertex AI that answers only at the model's exact URL with `Authorization: Bearer <token>`,
 * and a local OAuth token endpoint that verifies the service account's signed JWT with its
 * public key. No real cloud is reachable here.
 */
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { eventually, postJson, startTestGateway, type TestGateway } from "./harness.ts";
import { type FakeOAuth, startFakeOAuth } from "./fake_upstreams/fake_oauth.ts";
import { checked, type Expected } from "./fake_upstreams/cloud_script.ts";
import * as geminiFake from "./fake_upstreams/gemini_script.ts";
import * as anthropicFake from "./fake_upstreams/anthropic_script.ts";
import { type Call, type Script, startFakeUpstream } from "./fake_upstreams/server.ts";

const PROJECT = "acme-prod-42";
const GEMINI = "gemini-2.5-flash";
const CLAUDE = "claude-sonnet-4@20250514";

type Vertex = {
  project: string;
  location: string;
  service_account_env?: string;
  access_token_env?: string;
};

function vertexRoute(
  url: string,
  opts: { kind: "gemini" | "anthropic"; model: string; vertex: Vertex; backup?: string },
): ConfigInput {
  return {
    failover: { retries_per_candidate: 0 },
    upstreams: [
      { id: "vx", kind: opts.kind, base_url: url, vertex: opts.vertex },
      ...(opts.backup ? [{ id: "backup", kind: "gemini" as const, base_url: opts.backup }] : []),
    ],
    routes: [{
      model: "smart",
      candidates: [
        { upstream: "vx", model: opts.model },
        ...(opts.backup ? [{ upstream: "backup", model: "gemini-api" }] : []),
      ],
    }],
  };
}

const serviceAccount = (location = "us-central1"): Vertex => ({
  project: PROJECT,
  location,
  service_account_env: "VERTEX_SA",
});

function modelPath(opts: { location: string; publisher: string; model: string; method: string }) {
  return `/v1/projects/${PROJECT}/locations/${opts.location}/publishers/${opts.publisher}/` +
    `models/${opts.model}:${opts.method}`;
}

/** The bearer token the fake OAuth endpoint issued last. */
function issued(oauth: FakeOAuth): string {
  const token = oauth.calls.findLast((c) => c.token)?.token;
  assert.ok(token, `no token issued: ${JSON.stringify(oauth.calls)}`);
  return token;
}

const geminiScript = { text: ["Hello", " from Vertex"], usage: { input: 6, output: 3 } };

function geminiAnswer(call: Call): Script {
  return call.path.includes(":streamGenerateContent")
    ? {
      headers: { "content-type": "text/event-stream" },
      body: geminiFake.streamChunks(geminiScript).map((send) => ({ send })),
    }
    : { body: [{ send: geminiFake.wholeBody(geminiScript) }] };
}

const claudeScript = { text: ["Hi", " from Claude on Vertex"], usage: { input: 7, output: 5 } };

function claudeAnswer(call: Call): Script {
  return call.path.endsWith(":streamRawPredict")
    ? {
      headers: { "content-type": "text/event-stream" },
      body: anthropicFake.streamChunks(claudeScript).map((send) => ({ send: String(send) })),
    }
    : { body: [{ send: anthropicFake.wholeBody(claudeScript) }] };
}

function genai(gw: TestGateway, requestId?: string) {
  return new GoogleGenAI({
    apiKey: "unused",
    httpOptions: {
      baseUrl: gw.url,
      apiVersion: "v1beta",
      headers: requestId ? { "x-request-id": requestId } : {},
    },
  });
}

async function collect(stream: AsyncIterable<{ text?: string }>): Promise<string> {
  let text = "";
  for await (const chunk of stream) text += chunk.text ?? "";
  return text;
}

Deno.test("vertex gemini: streamed and whole at the model's URL, with a service account's token fetched once", async () => {
  await using oauth = await startFakeOAuth();
  let expectedToken = "";
  const expected = (call: Call): Expected => ({
    path: call.path.includes(":stream")
      ? modelPath({
        location: "us-central1",
        publisher: "google",
        model: GEMINI,
        method: "streamGenerateContent?alt=sse",
      })
      : modelPath({
        location: "us-central1",
        publisher: "google",
        model: GEMINI,
        method: "generateContent",
      }),
    headers: { authorization: `Bearer ${expectedToken}` },
    absent: ["x-goog-api-key", "api-key"],
    body: (json) => Array.isArray(json.contents) && !("model" in json) ? null : "not a Gemini body",
  });
  await using up = startFakeUpstream({
    fallback: checked((call) => {
      expectedToken = issued(oauth);
      return expected(call);
    }, geminiAnswer),
  });
  await using gw = await startTestGateway(
    vertexRoute(up.url, { kind: "gemini", model: GEMINI, vertex: serviceAccount() }),
    { env: { VERTEX_SA: await oauth.serviceAccountJson() } },
  );
  const ai = genai(gw, "vx-gemini-stream");
  const streamed = await collect(
    await ai.models.generateContentStream({ model: "smart", contents: "hi" }),
  );
  assert.equal(streamed, "Hello from Vertex");
  const whole = await genai(gw).models.generateContent({ model: "smart", contents: "hi" });
  assert.equal(whole.text, "Hello from Vertex");
  assert.deepEqual(up.calls.map((c) => c.path.split(":")[1]), [
    "streamGenerateContent?alt=sse",
    "generateContent",
  ]);
  // One grant for both calls: the token is kept, not fetched per request.
  assert.equal(oauth.calls.length, 1);
  assert.equal(oauth.calls[0]?.claims?.iss, oauth.clientEmail);
  const { request, attempts } = await gw.row("vx-gemini-stream");
  assert.equal(request.status, 200);
  assert.equal(request.inputTokens, 6);
  assert.deepEqual(attempts.map((a) => [a.upstream, a.model, a.outcome]), [[
    "vx",
    GEMINI,
    "success",
  ]]);
});

Deno.test("vertex claude: :streamRawPredict and :rawPredict, anthropic_version in the body, no model", async () => {
  await using oauth = await startFakeOAuth();
  const expected = (call: Call): Expected => ({
    path: modelPath({
      location: "us-east5",
      publisher: "anthropic",
      model: CLAUDE,
      method: call.path.endsWith(":streamRawPredict") ? "streamRawPredict" : "rawPredict",
    }),
    headers: { authorization: `Bearer ${issued(oauth)}` },
    absent: ["x-api-key"],
    body: (json) =>
      json.anthropic_version !== "vertex-2023-10-16"
        ? `anthropic_version ${json.anthropic_version}`
        : "model" in json
        ? "a model in the body"
        : Array.isArray(json.messages) && typeof json.max_tokens === "number"
        ? null
        : "not a Messages body",
  });
  await using up = startFakeUpstream({ fallback: checked(expected, claudeAnswer) });
  await using gw = await startTestGateway(
    vertexRoute(up.url, { kind: "anthropic", model: CLAUDE, vertex: serviceAccount("us-east5") }),
    { env: { VERTEX_SA: await oauth.serviceAccountJson() } },
  );
  const client = new Anthropic({ baseURL: gw.url, apiKey: "unused", maxRetries: 0 });
  const streamed = await client.messages.stream({
    model: "smart",
    max_tokens: 100,
    messages: [{ role: "user", content: "hi" }],
  }).finalText();
  assert.equal(streamed, "Hi from Claude on Vertex");
  const whole = await client.messages.create({
    model: "smart",
    max_tokens: 100,
    messages: [{ role: "user", content: "hi" }],
  });
  assert.equal(
    whole.content[0]?.type === "text" && whole.content[0].text,
    "Hi from Claude on Vertex",
  );
  // Translated from another format: the same body shape.
  const chat = await gw.openai().chat.completions.create({
    model: "smart",
    messages: [{ role: "user", content: "hi" }],
  });
  assert.equal(chat.choices[0]?.message.content, "Hi from Claude on Vertex");
  // Claude Code's ?beta=true is not sent on: Google's front end refuses an unknown parameter.
  const beta = await postJson(`${gw.url}/v1/messages?beta=true`, {
    model: "smart",
    max_tokens: 10,
    messages: [{ role: "user", content: "hi" }],
  }, { "anthropic-beta": "context-1m-2025-08-07" });
  assert.equal(beta.status, 200, await beta.clone().text());
  await beta.body?.cancel();
  assert.equal(up.calls.length, 4);
  assert.equal(up.calls[3]?.headers.get("anthropic-beta"), "context-1m-2025-08-07");
  assert.equal(oauth.calls.length, 1);
});

Deno.test("vertex: a static access token from the environment, at the global endpoint's path", async () => {
  const token = "ya29.static-token-from-gcloud";
  const expected: Expected = {
    path: modelPath({
      location: "global",
      publisher: "google",
      model: GEMINI,
      method: "generateContent",
    }),
    headers: { authorization: `Bearer ${token}` },
  };
  await using up = startFakeUpstream({ fallback: checked(() => expected, geminiAnswer) });
  await using gw = await startTestGateway(
    vertexRoute(up.url, {
      kind: "gemini",
      model: GEMINI,
      vertex: { project: PROJECT, location: "global", access_token_env: "VERTEX_TOKEN" },
    }),
    { env: { VERTEX_TOKEN: token } },
  );
  const whole = await genai(gw).models.generateContent({ model: "smart", contents: "hi" });
  assert.equal(whole.text, "Hello from Vertex");
});

Deno.test("vertex: calls that need a token at once share one grant", async () => {
  await using oauth = await startFakeOAuth();
  let release!: () => void;
  oauth.holdUntil(new Promise<void>((r) => (release = r)));
  await using up = startFakeUpstream({
    fallback: checked(() => ({
      path: modelPath({
        location: "us-central1",
        publisher: "google",
        model: GEMINI,
        method: "generateContent",
      }),
      headers: { authorization: `Bearer ${issued(oauth)}` },
    }), geminiAnswer),
  });
  await using gw = await startTestGateway(
    vertexRoute(up.url, { kind: "gemini", model: GEMINI, vertex: serviceAccount() }),
    { env: { VERTEX_SA: await oauth.serviceAccountJson() } },
  );
  const answers = Array.from(
    { length: 5 },
    () => genai(gw).models.generateContent({ model: "smart", contents: "hi" }),
  );
  // All five hold their slot and wait for the same grant.
  await eventually(() => gw.slots.inFlight("vx") === 5 && oauth.calls.length > 0, {
    what: "five calls waiting for a token",
  });
  assert.equal(oauth.calls.length, 1);
  release();
  for (const answer of await Promise.all(answers)) assert.equal(answer.text, "Hello from Vertex");
  assert.equal(oauth.calls.length, 1);
  assert.equal(up.calls.length, 5);
});

Deno.test("vertex: a failing token endpoint is that upstream's failure: failover, cooldown charged, no crash", async () => {
  await using oauth = await startFakeOAuth();
  oauth.failWith(500);
  await using up = startFakeUpstream({ fallback: geminiAnswer });
  await using backup = startFakeUpstream({ fallback: geminiAnswer });
  const keyText = await oauth.serviceAccountJson();
  await using gw = await startTestGateway(
    vertexRoute(up.url, {
      kind: "gemini",
      model: GEMINI,
      vertex: serviceAccount(),
      backup: backup.url,
    }),
    { env: { VERTEX_SA: keyText } },
  );
  const whole = await genai(gw, "vx-token-500").models.generateContent({
    model: "smart",
    contents: "hi",
  });
  assert.equal(whole.text, "Hello from Vertex");
  assert.equal(up.calls.length, 0, "no call without a token");
  assert.equal(backup.calls.length, 1);
  const { request, attempts } = await gw.row("vx-token-500");
  assert.equal(request.status, 200);
  assert.deepEqual(attempts.map((a) => [a.upstream, a.outcome]), [["vx", "error"], [
    "backup",
    "success",
  ]]);
  assert.equal(attempts[0]?.errorCode, "gw.upstream.credentials");
  assert.match(
    attempts[0]?.errorMessage ?? "",
    /upstream vx: could not get an access token: the token endpoint answered 500/,
  );
  assert.equal(gw.cooldowns.get("vx").consecutiveFailures, 1);
  // Nothing secret in the row: not the key, not a token.
  assert.doesNotMatch(JSON.stringify({ request, attempts }), /PRIVATE KEY|ya29\./);
  // The endpoint recovers: once its backoff (1 s after the failure) is over, the next call gets
  // a token and goes to Vertex.
  oauth.failWith(null);
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  const again = await genai(gw).models.generateContent({ model: "smart", contents: "hi" });
  assert.equal(again.text, "Hello from Vertex");
  assert.equal(up.calls.length, 1);
  assert.equal(up.calls[0]?.headers.get("authorization"), `Bearer ${issued(oauth)}`);
});

Deno.test("vertex: a key the endpoint cannot verify, and one that is not a key, fail over with the reason", async () => {
  await using oauth = await startFakeOAuth();
  await using up = startFakeUpstream({ fallback: geminiAnswer });
  await using backup = startFakeUpstream({ fallback: geminiAnswer });
  const cases = [
    // Signed with another private key than the account's: the endpoint checks the signature.
    {
      key: await oauth.serviceAccountJson({ otherKey: true }),
      reason: /answered 400 \(invalid_grant: Invalid JWT Signature\.\)/,
    },
    // Not a key at all, or a token URI a signed assertion must not be sent to.
    { key: "{not json", reason: /the service-account key is not a JSON object/ },
    {
      key: await oauth.serviceAccountJson({ tokenUri: "http://198.51.100.7/token" }),
      reason: /token_uri that is neither https nor http on a loopback address/,
    },
  ];
  const env = Object.fromEntries(cases.map((c, i) => [`VERTEX_SA_${i}`, c.key]));
  await using gw = await startTestGateway({
    failover: { retries_per_candidate: 0 },
    upstreams: [
      ...cases.map((_, i) => ({
        id: `vx${i}`,
        kind: "gemini" as const,
        base_url: up.url,
        vertex: { ...serviceAccount(), service_account_env: `VERTEX_SA_${i}` },
      })),
      { id: "backup", kind: "gemini", base_url: backup.url },
    ],
    routes: cases.map((_, i) => ({
      model: `r${i}`,
      candidates: [{ upstream: `vx${i}`, model: GEMINI }, { upstream: "backup", model: "g" }],
    })),
  }, { env });
  for (const [i, { reason }] of cases.entries()) {
    const answer = await genai(gw, `vx-bad-key-${i}`).models.generateContent({
      model: `r${i}`,
      contents: "hi",
    });
    assert.equal(answer.text, "Hello from Vertex");
    const { attempts } = await gw.row(`vx-bad-key-${i}`);
    assert.deepEqual(attempts.map((a) => [a.upstream, a.outcome]), [
      [`vx${i}`, "error"],
      ["backup", "success"],
    ]);
    assert.match(attempts[0]?.errorMessage ?? "", reason);
    assert.doesNotMatch(attempts[0]?.errorMessage ?? "", /PRIVATE KEY|not json/);
  }
  assert.equal(oauth.calls[0]?.refused, "Invalid JWT Signature.");
  assert.equal(oauth.calls.length, 1, "nothing is sent to a token URI that is not safe");
  assert.equal(up.calls.length, 0);
});

Deno.test("vertex: a token count is our estimate, with no call to Vertex or the token endpoint", async () => {
  await using oauth = await startFakeOAuth();
  await using up = startFakeUpstream({ fallback: claudeAnswer });
  await using gw = await startTestGateway(
    vertexRoute(up.url, { kind: "anthropic", model: CLAUDE, vertex: serviceAccount("us-east5") }),
    { env: { VERTEX_SA: await oauth.serviceAccountJson() } },
  );
  const res = await postJson(`${gw.url}/v1/messages/count_tokens`, {
    model: "smart",
    messages: [{ role: "user", content: "hello there" }],
  });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("x-pulsegate-token-count"), "estimated");
  assert.ok((await res.json()).input_tokens > 0);
  assert.equal(up.calls.length, 0);
  assert.equal(oauth.calls.length, 0);
});
