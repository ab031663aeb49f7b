import assert from "node:assert/strict";
import { chatRoute, eventually, postJson, startTestGateway } from "./harness.ts";
import { chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { type FakeUpstream, startFakeUpstream } from "./fake_upstreams/server.ts";

const messages = [{ role: "user", content: "hi" }];
const json = { "content-type": "application/json" };

function api(url: string, method: string, body?: unknown): Promise<Response> {
  return fetch(url, {
    method,
    headers: json,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

Deno.test("guardrails: {enabled: true} alone is valid; a blocking rule answers 400 in the client's format", async () => {
  const up = startFakeUpstream({ fallback: () => chatWhole({ text: ["ok"] }) });
  const gw = await startTestGateway(chatRoute([up.url]));
  try {
    const on = await api(`${gw.url}/admin/api/guardrails`, "PUT", { enabled: true });
    assert.equal(on.status, 200);
    assert.deepEqual(await on.json(), {
      enabled: true,
      max_input_chars: null,
      max_checked_chars: 1_000_000,
      budget_ms: 250,
      on_unchecked: "block",
      rules: [],
    });
    const bad = await api(`${gw.url}/admin/api/guardrails`, "PUT", { enabled: true, rulez: [] });
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).problems[0].path, "rulez");
    const rules = await api(`${gw.url}/admin/api/guardrails`, "PUT", {
      enabled: true,
      rules: [{ id: "no-secrets", pattern: "password\\s*=", message: "no credentials in prompts" }],
    });
    assert.equal(rules.status, 200);

    const ok = await postJson(`${gw.url}/v1/chat/completions`, { model: "smart", messages });
    assert.equal(ok.status, 200);
    await ok.body?.cancel();
    const leaky = [{ role: "user", content: "my PASSWORD = hunter2" }];
    const chat = await postJson(`${gw.url}/v1/chat/completions`, {
      model: "smart",
      messages: leaky,
    });
    assert.equal(chat.status, 400);
    const chatBody = await chat.json();
    assert.equal(chatBody.error.code, "guardrail.blocked");
    assert.match(chatBody.error.message, /no credentials in prompts/);
    const anthropic = await postJson(`${gw.url}/v1/messages`, {
      model: "smart",
      max_tokens: 5,
      messages: leaky,
    });
    assert.equal(anthropic.status, 400);
    const anthropicBody = await anthropic.json();
    assert.equal(anthropicBody.type, "error");
    assert.equal(anthropicBody.error.type, "invalid_request_error");
    assert.equal(up.calls.length, 1, "blocked requests never reach the upstream");
    const { request } = await gw.row(chat.headers.get("x-request-id")!);
    assert.equal(request.status, 400);
    assert.equal(request.errorCode, "guardrail.blocked");
    assert.equal(request.failureSource, "client");
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("destinations: enabled false is honoured, adding one never enables another, records carry hops", async () => {
  const up = startFakeUpstream({
    fallback: () => chatWhole({ text: ["ok"], usage: { input: 2, output: 1 } }),
  });
  const receivers: FakeUpstream[] = [0, 1, 2].map(() =>
    startFakeUpstream({ fallback: () => ({ status: 200 }) })
  );
  const [quiet, hook, otlp] = receivers as [FakeUpstream, FakeUpstream, FakeUpstream];
  const gw = await startTestGateway(chatRoute([up.url]));
  try {
    const made = await api(`${gw.url}/admin/api/destinations`, "POST", {
      id: "quiet",
      kind: "webhook",
      url: `${quiet.url}/hook`,
      enabled: false,
    });
    assert.equal(made.status, 201);
    assert.equal((await made.json()).enabled, false);
    const second = await api(`${gw.url}/admin/api/destinations`, "POST", {
      kind: "webhook",
      url: `${hook.url}/hook`,
    });
    assert.equal(second.status, 201);
    const list = await (await fetch(`${gw.url}/admin/api/destinations`)).json();
    assert.deepEqual(list.destinations.map((d: { enabled: boolean }) => d.enabled), [false, true]);

    const res = await postJson(`${gw.url}/v1/chat/completions`, { model: "smart", messages });
    await res.body?.cancel();
    const id = res.headers.get("x-request-id");
    await eventually(() => hook.calls.length > 0, {
      what: "the enabled webhook received the record",
    });
    const sent = hook.calls[0]!.json as {
      records: Array<{ request: { id: string; status: number }; attempts: unknown[] }>;
    };
    assert.equal(sent.records[0]!.request.id, id);
    assert.equal(sent.records[0]!.request.status, 200);
    assert.equal(sent.records[0]!.attempts.length, 1);
    assert.equal(quiet.calls.length, 0, "a disabled destination receives nothing");

    const patched = await api(`${gw.url}/admin/api/destinations/quiet`, "PATCH", { enabled: true });
    assert.equal(patched.status, 200);
    const badPatch = await api(`${gw.url}/admin/api/destinations/quiet`, "PATCH", {
      url: "ftp://x",
    });
    assert.equal(badPatch.status, 400);
    await badPatch.body?.cancel();
    const o = await api(`${gw.url}/admin/api/destinations`, "POST", {
      id: "otel",
      kind: "otlp",
      url: `${otlp.url}/v1/logs`,
    });
    assert.equal(o.status, 201);
    const again = await postJson(`${gw.url}/v1/chat/completions`, { model: "smart", messages });
    await again.body?.cancel();
    await eventually(() => quiet.calls.length > 0 && otlp.calls.length > 0, {
      what: "both received the next record",
    });
    const logs = otlp.calls[0]!.json as {
      resourceLogs: Array<
        { scopeLogs: Array<{ logRecords: Array<{ attributes: Array<{ key: string }> }> }> }
      >;
    };
    const keys = logs.resourceLogs[0]!.scopeLogs[0]!.logRecords[0]!.attributes.map((a) => a.key);
    assert.ok(keys.includes("pulsegate.request_id") && keys.includes("gen_ai.usage.input_tokens"));
    assert.equal((await api(`${gw.url}/admin/api/destinations/otel`, "DELETE")).status, 204);
  } finally {
    await gw.stop();
    await up.close();
    for (const r of receivers) await r.close();
  }
});
