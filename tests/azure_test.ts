/**
 * Azure OpenAI as an upstream of the Chat and Responses kinds (docs/providers.md "Azure
 * OpenAI"), end to end: the official SDKs unmodified against the gateway, the gateway against a
 * fake Azure resource that answers only at the exact URL (the v1 form and the dated deployment
 * form with its api-version), with the auth header Azure reads, and the body's `model` the
 * deployment name. Azure's content filter is the caller's answer, not an outage.
 */
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { errorMeaning } from "../gateway/formats/error_vocab.ts";
import { chatUpstream } from "../gateway/formats/openai_chat/mod.ts";
import { openAiUrl } from "../gateway/formats/cloud/azure.ts";
import { validateConfig } from "../gateway/config/validate.ts";
import { startTestGateway } from "./harness.ts";
import {
  azureChatStream,
  azureChatWhole,
  azureContentFilterError,
  checked,
  type Expected,
} from "./fake_upstreams/cloud_script.ts";
import {
  responsesStreamChunks,
  responsesWholeBody,
} from "./fake_upstreams/openai_responses_script.ts";
import { chatStream } from "./fake_upstreams/openai_chat_script.ts";
import { type Call, startFakeUpstream } from "./fake_upstreams/server.ts";

const KEY = "azure-resource-key-0123";
const ENTRA = "eyJ0eXAiOiJKV1QiLCJhbGciOi.entra-token";
const env = { AZURE_KEY: KEY, AZURE_TOKEN: ENTRA };
const DEPLOYMENT = "gpt-4o-prod";

type Azure = { api_version?: string; auth?: "api-key" | "bearer" };

function azureRoute(
  url: string,
  opts: { kind?: "openai-chat" | "openai-responses"; azure: Azure; backup?: string },
): ConfigInput {
  const keyEnv = opts.azure.auth === "bearer" ? "AZURE_TOKEN" : "AZURE_KEY";
  return {
    failover: { retries_per_candidate: 0 },
    upstreams: [
      {
        id: "az",
        kind: opts.kind ?? "openai-chat",
        base_url: url,
        api_key_env: keyEnv,
        azure: opts.azure,
      },
      ...(opts.backup
        ? [{ id: "backup", kind: "openai-chat" as const, base_url: opts.backup }]
        : []),
    ],
    routes: [{
      model: "smart",
      candidates: [
        { upstream: "az", model: DEPLOYMENT },
        ...(opts.backup ? [{ upstream: "backup", model: "other" }] : []),
      ],
    }],
  };
}

/** Azure's auth as it reads it: the resource key in `api-key`, or an Entra ID bearer token. */
function auth(how: "api-key" | "bearer"): Pick<Expected, "headers" | "absent"> {
  return how === "api-key"
    ? { headers: { "api-key": KEY }, absent: ["authorization"] }
    : { headers: { authorization: `Bearer ${ENTRA}` }, absent: ["api-key"] };
}

const deploymentAsModel = (json: Record<string, unknown>) =>
  json.model === DEPLOYMENT ? null : `model ${json.model}, expected the deployment name`;

const chatAnswer = (call: Call) =>
  (call.json as { stream?: boolean }).stream
    ? azureChatStream(["Hello", " from Azure"])
    : azureChatWhole("Hello from Azure");

Deno.test("azure v1: Chat streamed and whole at /openai/v1/chat/completions with the api-key header", async () => {
  const expected: Expected = {
    path: "/openai/v1/chat/completions",
    ...auth("api-key"),
    body: deploymentAsModel,
  };
  await using up = startFakeUpstream({ fallback: checked(() => expected, chatAnswer) });
  await using gw = await startTestGateway(azureRoute(up.url, { azure: {} }), { env });
  const client = gw.openai();
  const stream = await client.chat.completions.create({
    model: "smart",
    messages: [{ role: "user", content: "hi" }],
    stream: true,
  }, { headers: { "x-request-id": "az-v1-stream" } });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
  assert.equal(text, "Hello from Azure");
  const whole = await client.chat.completions.create({
    model: "smart",
    messages: [{ role: "user", content: "hi" }],
  });
  assert.equal(whole.choices[0]?.message.content, "Hello from Azure");
  assert.equal(up.calls.length, 2);
  const { request, attempts } = await gw.row("az-v1-stream");
  assert.equal(request.status, 200);
  assert.deepEqual(attempts.map((a) => [a.upstream, a.model, a.outcome]), [[
    "az",
    DEPLOYMENT,
    "success",
  ]]);
  assert.equal(request.inputTokens, 9, "Azure's usage is read as OpenAI's");
});

Deno.test("azure dated API: a translated Chat call goes to the deployment's path with api-version", async () => {
  const expected: Expected = {
    path: `/openai/deployments/${DEPLOYMENT}/chat/completions?api-version=2024-10-21`,
    ...auth("api-key"),
    // Azure OpenAI takes max_completion_tokens (reasoning deployments refuse max_tokens).
    body: (json) =>
      deploymentAsModel(json) ??
        (json.max_completion_tokens === 50 && !("max_tokens" in json) ? null : "max_tokens field"),
  };
  await using up = startFakeUpstream({ fallback: checked(() => expected, chatAnswer) });
  await using gw = await startTestGateway(
    azureRoute(up.url, { azure: { api_version: "2024-10-21" } }),
    { env },
  );
  const client = new Anthropic({ baseURL: gw.url, apiKey: "unused", maxRetries: 0 });
  const message = await client.messages.create({
    model: "smart",
    max_tokens: 50,
    messages: [{ role: "user", content: "hi" }],
  });
  assert.deepEqual(message.content, [{ type: "text", text: "Hello from Azure" }]);
  const streamed = await client.messages.stream({
    model: "smart",
    max_tokens: 50,
    messages: [{ role: "user", content: "hi" }],
  }).finalText();
  assert.equal(streamed, "Hello from Azure");
  assert.equal(up.calls.length, 2);
});

const responsesScript = { text: ["Hi", " there"], usage: { input: 5, output: 2 } };
const responsesAnswer = (call: Call) =>
  (call.json as { stream?: boolean }).stream
    ? {
      headers: { "content-type": "text/event-stream" },
      body: responsesStreamChunks(responsesScript).map((send) => ({ send })),
    }
    : { body: [{ send: responsesWholeBody(responsesScript) }] };

for (
  const { name, azure, path } of [
    {
      name: "v1, Entra ID bearer token",
      azure: { auth: "bearer" as const },
      path: "/openai/v1/responses",
    },
    {
      name: "dated api-version, api-key",
      azure: { api_version: "2025-04-01-preview" },
      // Responses has no deployment path: the deployment is the body's model.
      path: "/openai/responses?api-version=2025-04-01-preview",
    },
  ]
) {
  Deno.test(`azure Responses (${name}): streamed and whole at ${path}`, async () => {
    const expected: Expected = { path, ...auth(azure.auth ?? "api-key"), body: deploymentAsModel };
    await using up = startFakeUpstream({ fallback: checked(() => expected, responsesAnswer) });
    await using gw = await startTestGateway(
      azureRoute(up.url, { kind: "openai-responses", azure }),
      { env },
    );
    const client = gw.openai();
    const streamed = await client.responses.stream({ model: "smart", input: "hi" }).finalResponse();
    assert.equal(streamed.output_text, "Hi there");
    const whole = await client.responses.create({ model: "smart", input: "hi" });
    assert.equal(whole.output_text, "Hi there");
    assert.equal(up.calls.length, 2);
  });
}

Deno.test("azure content filter: the prompt's refusal is the caller's 400, with no failover and no cooldown", async () => {
  await using up = startFakeUpstream({ fallback: () => azureContentFilterError() });
  await using backup = startFakeUpstream({ fallback: () => chatStream({ text: ["elsewhere"] }) });
  await using gw = await startTestGateway(
    azureRoute(up.url, { azure: {}, backup: backup.url }),
    { env },
  );
  // A Chat client gets Azure's own answer, unchanged.
  const res = await fetch(`${gw.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-request-id": "az-filter" },
    body: JSON.stringify({ model: "smart", messages: [{ role: "user", content: "bad" }] }),
  });
  assert.equal(res.status, 400);
  const body = await res.json();
  assert.equal(body.error.code, "content_filter");
  assert.equal(body.error.innererror.code, "ResponsibleAIPolicyViolation");
  // An Anthropic client reads it as a refused request, with Azure's words kept.
  const client = new Anthropic({ baseURL: gw.url, apiKey: "unused", maxRetries: 0 });
  const err = await client.messages.create({
    model: "smart",
    max_tokens: 10,
    messages: [{ role: "user", content: "bad" }],
  }).catch((e) => e);
  assert.ok(err instanceof Anthropic.BadRequestError, String(err));
  const details = (err.error as { error: { details: Record<string, string> } }).error.details;
  assert.equal(details.upstream_code, "content_filter");
  assert.equal(backup.calls.length, 0, "a refusal is not failed over");
  assert.equal(gw.cooldowns.get("az").consecutiveFailures, 0, "nor charged to Azure's health");
  const { request, attempts } = await gw.row("az-filter");
  assert.equal(request.errorCode, "gw.upstream.rejected");
  assert.deepEqual(attempts.map((a) => a.upstream), ["az"]);
});

Deno.test("azure content filter in a stream: finish_reason content_filter is a refusal to an Anthropic client", async () => {
  await using up = startFakeUpstream({
    fallback: () => azureChatStream(["Part"], { finish: "content_filter" }),
  });
  await using gw = await startTestGateway(azureRoute(up.url, { azure: {} }), { env });
  const client = new Anthropic({ baseURL: gw.url, apiKey: "unused", maxRetries: 0 });
  const message = await client.messages.stream({
    model: "smart",
    max_tokens: 10,
    messages: [{ role: "user", content: "hi" }],
  }).finalMessage();
  assert.equal(message.stop_reason, "refusal");
});

Deno.test("azure: URLs per shape, the deployment one path segment, the error's meaning", () => {
  const upstream = (azure: Azure) =>
    validateUpstream({
      id: "az",
      kind: "openai-chat",
      base_url: "https://res.openai.azure.com/",
      api_key_env: "K",
      azure,
    });
  assert.equal(
    openAiUrl(upstream({}), { path: "chat/completions", model: "d" }),
    "https://res.openai.azure.com/openai/v1/chat/completions",
  );
  assert.equal(
    openAiUrl(upstream({ api_version: "2024-10-21" }), {
      path: "chat/completions",
      model: "a/../b?x",
    }),
    "https://res.openai.azure.com/openai/deployments/a%2F..%2Fb%3Fx/chat/completions?api-version=2024-10-21",
  );
  const filtered = { code: "content_filter", message: "filtered", param: "prompt", status: 400 };
  const err = chatUpstream.decodeError(400, JSON.stringify({ error: filtered }));
  assert.equal(err.source, "client");
  assert.equal(errorMeaning(err), "content_policy");
});

function validateUpstream(upstream: Record<string, unknown>) {
  const checked = validateConfig({
    upstreams: [upstream],
    routes: [{ model: "m", candidates: [{ upstream: upstream.id, model: "x" }] }],
  });
  if (!checked.ok) throw new Error(JSON.stringify(checked.problems));
  return checked.config.upstreams[0]!;
}
