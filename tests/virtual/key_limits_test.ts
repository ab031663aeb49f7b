import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import { ApiError, GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { ADMIN_TOKEN, config, ENV } from "../fixtures/key_limits_config.ts";
import { chatStream, chatWhole } from "../fake_upstreams/openai_chat_script.ts";
import { startVirtualGateway, useGlobalFetch, type VirtualGateway } from "../virtual_gateway.ts";

/**
 * docs/config.md "Prices and key limits": rpm, tpm and budgets, end to end through the SDKs, a
 * whole gateway in virtual time. The history worker's part is tests/key_limits_test.ts.
 */

const BASE = "http://127.0.0.1";

async function withLimits(run: (v: VirtualGateway, calls: () => number) => Promise<void>) {
  await using v = await startVirtualGateway({
    config: ([url]) => config(url!),
    env: { ...ENV, PULSEGATE_ADMIN_TOKEN: ADMIN_TOKEN },
  });
  const up = v.ups[0]!;
  up.setHandler((call) => {
    const big = JSON.stringify(call.json).includes("big");
    // Big: 100k input and 50k output tokens, 1 + 1 USD at the prices above.
    const usage = big ? { input: 100_000, output: 50_000 } : { input: 60, output: 40 };
    const stream = (call.json as { stream?: boolean }).stream;
    return stream ? chatStream({ text: ["h", "i"], usage }) : chatWhole({ text: ["hi"], usage });
  });
  await run(v, () => up.calls.length);
}

/** `work` (an SDK's call) awaited in virtual time, its error answered rather than thrown. */
function settled<T>(v: VirtualGateway, work: () => Promise<T>): Promise<T | unknown> {
  return v.run((async () => await work())()).catch((err: unknown) => err);
}

/** A POST as a raw client sends it, in virtual time. */
function post(v: VirtualGateway, path: string, body: unknown, headers: Record<string, string>) {
  return v.send(path, body, { headers });
}

/** A GET of the gateway's own API, as JSON. */
async function getJson(v: VirtualGateway, path: string, headers: Record<string, string>) {
  return await v.run((async () => await (await v.fetch(`${BASE}${path}`, { headers })).json())());
}

async function rowsWith(v: VirtualGateway, code: string) {
  await v.run(v.gw.writer.flush());
  const result = await v.gw.db.client.execute({
    sql: "SELECT key_id, status, failure_source FROM requests WHERE error_code = ? ORDER BY key_id",
    args: [code],
  });
  return result.rows.map((r) => ({ ...r }));
}

function retryAfterOk(value: string | null | undefined) {
  const secs = Number(value);
  assert.ok(Number.isInteger(secs) && secs >= 1 && secs <= 60, `Retry-After ${value}`);
}

Deno.test("rpm 2: the third request in the minute gets 429 with Retry-After in each SDK", async () => {
  await withLimits(async (v, calls) => {
    const openai = new OpenAI({
      baseURL: `${BASE}/v1`,
      apiKey: "sk-oai",
      maxRetries: 0,
      fetch: v.fetch,
    });
    const ask = () =>
      settled(v, () =>
        openai.chat.completions.create({
          model: "smart",
          messages: [{ role: "user", content: "q" }],
        }));
    await ask();
    await ask();
    const oaiErr = await ask();
    assert.ok(oaiErr instanceof OpenAI.RateLimitError, String(oaiErr));
    assert.equal(oaiErr.code, "gw.key.rate_limited");
    retryAfterOk(oaiErr.headers?.get("retry-after"));
    assert.equal(oaiErr.headers?.get("x-pulsegate-error-code"), "gw.key.rate_limited");

    const anthropic = new Anthropic({
      baseURL: BASE,
      apiKey: "sk-ant",
      maxRetries: 0,
      fetch: v.fetch,
    });
    const askAnt = () =>
      settled(v, () =>
        anthropic.messages.create({
          model: "smart",
          max_tokens: 10,
          messages: [{ role: "user", content: "q" }],
        }));
    await askAnt();
    await askAnt();
    const antErr = await askAnt();
    assert.ok(antErr instanceof Anthropic.RateLimitError, String(antErr));
    retryAfterOk(antErr.headers?.get("retry-after"));
    assert.match(antErr.message, /over its limit of 2 requests per minute/);

    const genai = new GoogleGenAI({
      apiKey: "sk-gem",
      httpOptions: { baseUrl: BASE, apiVersion: "v1beta", retryOptions: { attempts: 1 } },
    });
    const askGem = async () => {
      using _fetch = useGlobalFetch(v);
      return await settled(
        v,
        () => genai.models.generateContent({ model: "smart", contents: "q" }),
      );
    };
    await askGem();
    await askGem();
    const gemErr = await askGem();
    assert.ok(gemErr instanceof ApiError, String(gemErr));
    assert.equal(gemErr.status, 429);
    assert.match(gemErr.message, /RESOURCE_EXHAUSTED/);
    // The raw response: Retry-After on the Gemini endpoint too.
    const raw = await post(v, "/v1beta/models/smart:generateContent", {
      contents: [{ parts: [{ text: "q" }] }],
    }, { "x-goog-api-key": "sk-gem" });
    assert.equal(raw.status, 429);
    retryAfterOk(raw.headers.get("retry-after"));

    assert.equal(calls(), 6, "two upstream calls per key, none for a refused request");
    const rows = await rowsWith(v, "gw.key.rate_limited");
    assert.deepEqual(rows.map((r) => [r.key_id, r.status, r.failure_source]), [
      ["ant", 429, "client"],
      ["gem", 429, "client"],
      ["gem", 429, "client"],
      ["oai", 429, "client"],
    ]);
  });
});

Deno.test("rpm holds while the usage counters cannot be read but can be written", async () => {
  await withLimits(async (v, calls) => {
    // Reads of the shared counters fail (docs/scaling.md "Shared through libSQL"); their writes still land.
    const client = v.gw.db.client;
    const batch = client.batch.bind(client);
    client.batch = (statements, mode) =>
      mode === "read" ? Promise.reject(new Error("reads down")) : batch(statements, mode);
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await post(v, "/v1/chat/completions", {
          model: "smart",
          messages: [{ role: "user", content: "q" }],
        }, { authorization: "Bearer sk-oai" });
        statuses.push(res.status);
      }
      assert.deepEqual(statuses, [200, 200, 429, 429, 429], "this process's own count holds rpm 2");
      assert.equal(calls(), 2);
    } finally {
      client.batch = batch;
    }
  });
});

Deno.test("tpm counts billed tokens: 100 billed with tpm 50 refuses the next request", async () => {
  await withLimits(async (v, calls) => {
    const openai = new OpenAI({
      baseURL: `${BASE}/v1`,
      apiKey: "sk-tpm",
      maxRetries: 0,
      fetch: v.fetch,
    });
    const ask = () =>
      settled(v, () =>
        openai.chat.completions.create({
          model: "smart",
          messages: [{ role: "user", content: "q" }],
        }));
    const first = await ask() as OpenAI.ChatCompletion;
    assert.equal(first.usage?.total_tokens, 100);
    const err = await ask();
    assert.ok(err instanceof OpenAI.RateLimitError, String(err));
    assert.match(err.message, /50 tokens per minute/);
    retryAfterOk(err.headers?.get("retry-after"));
    assert.equal(calls(), 1);
    assert.deepEqual((await rowsWith(v, "gw.key.rate_limited")).map((r) => r.key_id), ["tpm"]);
  });
});

Deno.test("tpm and cost count a streamed answer's usage when its attempt ends", async () => {
  await withLimits(async (v, calls) => {
    const openai = new OpenAI({
      baseURL: `${BASE}/v1`,
      apiKey: "sk-tpm",
      maxRetries: 0,
      fetch: v.fetch,
    });
    const { text, response } = await v.run((async () => {
      const { data: stream, response } = await openai.chat.completions.create({
        model: "smart",
        stream: true,
        messages: [{ role: "user", content: "q" }],
      }).withResponse();
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
      return { text, response };
    })());
    assert.equal(text, "hi");
    const { request, attempts } = await v.row(response.headers.get("x-request-id")!);
    assert.equal(request.outputTokens, 40);
    assert.equal(attempts[0]?.costUsd, (60 * 10 + 40 * 20) / 1e6);
    assert.equal(request.costUsd, attempts[0]?.costUsd);
    const refused = await post(v, "/v1/chat/completions", {
      model: "smart",
      stream: true,
      messages: [{ role: "user", content: "q" }],
    }, { authorization: "Bearer sk-tpm" });
    assert.equal(refused.status, 429, "refused before any stream starts");
    retryAfterOk(refused.headers.get("retry-after"));
    assert.equal(JSON.parse(refused.text).error.code, "gw.key.rate_limited");
    assert.equal(calls(), 1);
  });
});

Deno.test("budget: refused once the key's cost in the UTC day reaches it; cost recorded", async () => {
  await withLimits(async (v, calls) => {
    const openai = new OpenAI({
      baseURL: `${BASE}/v1`,
      apiKey: "sk-budget",
      maxRetries: 0,
      fetch: v.fetch,
    });
    const ask = (content: string) =>
      settled(
        v,
        () =>
          openai.chat.completions.create({ model: "smart", messages: [{ role: "user", content }] })
            .withResponse(),
      );
    const small = await ask("small") as { response: Response };
    const { request, attempts } = await v.row(small.response.headers.get("x-request-id")!);
    assert.equal(attempts[0]?.costUsd, (60 * 10 + 40 * 20) / 1e6);
    assert.equal(request.costUsd, attempts[0]?.costUsd);
    await ask("big");
    await ask("big"); // admitted: 2.0014 USD spent is under 3
    const err = await ask("small");
    assert.ok(err instanceof OpenAI.RateLimitError, String(err));
    assert.equal(err.code, "gw.key.budget_exhausted");
    const retry = Number(err.headers?.get("retry-after"));
    assert.ok(retry >= 1 && retry <= 86_400, `Retry-After ${retry}`);
    assert.equal(calls(), 3);
    assert.deepEqual((await rowsWith(v, "gw.key.budget_exhausted")).map((r) => r.key_id), [
      "budget",
    ]);
    const metrics = await v.run((async () => await (await v.fetch(`${BASE}/metrics`)).text())());
    const spent = 4 + (60 * 10 + 40 * 20) / 1e6;
    const line = metrics.split("\n").find((l) =>
      l.startsWith('pulsegate_cost_total{route="smart",upstream="up1"}')
    );
    assert.ok(line, metrics);
    assert.ok(Math.abs(Number(line.split(" ")[1]) - spent) < 1e-9, line);

    const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const costs = await getJson(v, "/admin/api/costs?by=key", admin);
    const budget = costs.totals.find((t: { group: string }) => t.group === "budget");
    assert.equal(budget.requests, 4);
    assert.equal(budget.inputTokens, 200_060);
    assert.ok(Math.abs(budget.costUsd - spent) < 1e-9);
    const keys = await getJson(v, "/admin/api/keys", admin);
    const use = keys.keys.find((k: { id: string }) => k.id === "budget");
    assert.deepEqual(use.budget, { usd: 3, period: "day" });
    assert.ok(Math.abs(use.use.spentUsd - spent) < 1e-9);
    assert.equal(use.use.requestsLastMinute, 3);
    assert.equal(keys.keys.find((k: { id: string }) => k.id === "oai").use.requestsLastMinute, 0);
  });
});
