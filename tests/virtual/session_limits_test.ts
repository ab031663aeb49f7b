/**
 * docs/config.md "Session limits": `session_budget` and `loop_breaker` per key, end to end
 * through the three official SDKs, which must raise the 429s as rate-limit errors and, told
 * `x-should-retry: false`, not retry them. A whole gateway in virtual time: the loop breaker's
 * 600 s window is asserted at its edge.
 */
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import { ApiError, GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import { SessionLimits } from "../../gateway/policy/session_limits.ts";
import { systemClock } from "../../gateway/runtime/clock.ts";
import { GatewayError } from "../../gateway/runtime/gateway_error.ts";
import { chatWhole } from "../fake_upstreams/openai_chat_script.ts";
import { startVirtualGateway, useGlobalFetch, type VirtualGateway } from "../virtual_gateway.ts";

const ENV = { PULSEGATE_KEY_BUDGET: "sk-budget", PULSEGATE_KEY_LOOP: "sk-loop" };

function config(url: string): ConfigInput {
  return {
    upstreams: [{
      id: "up1",
      kind: "openai-chat",
      base_url: url,
      prices: { "model-1": { input: 10, output: 20 } },
    }],
    routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "model-1" }] }],
    keys: [
      { id: "budget", key_env: "PULSEGATE_KEY_BUDGET", session_budget: { requests: 2, usd: 1 } },
      { id: "loop", key_env: "PULSEGATE_KEY_LOOP", loop_breaker: { repeats: 3, window_secs: 600 } },
    ],
  };
}

async function rowsWith(v: VirtualGateway, code: string) {
  await v.run(v.gw.writer.flush());
  const result = await v.gw.db.client.execute({
    sql: "SELECT key_id, session_id, status FROM requests WHERE error_code = ? ORDER BY session_id",
    args: [code],
  });
  return result.rows.map((r) => [r.key_id, r.session_id, r.status]);
}

/**
 * The three SDKs on one key and one session; default retries, so a retry would show. Each call
 * runs in virtual time (Google's SDK reaches the gateway through the global fetch).
 */
function clients(v: VirtualGateway, opts: { apiKey: string; session: string }) {
  const headers = { "x-session-id": opts.session };
  const base = "http://127.0.0.1";
  const openai = new OpenAI({
    baseURL: `${base}/v1`,
    apiKey: opts.apiKey,
    defaultHeaders: headers,
    fetch: v.fetch,
  });
  const anthropic = new Anthropic({
    baseURL: base,
    apiKey: opts.apiKey,
    defaultHeaders: headers,
    fetch: v.fetch,
  });
  const genai = new GoogleGenAI({
    apiKey: opts.apiKey,
    httpOptions: { baseUrl: base, apiVersion: "v1beta", headers, retryOptions: { attempts: 1 } },
  });
  return {
    // Each SDK's own promise awaited in a plain one: `run` chains on what it is given.
    openai: (content = "q") =>
      v.run((async () =>
        await openai.chat.completions.create({
          model: "smart",
          messages: [{ role: "user", content }],
        }))()),
    anthropic: (content = "q") =>
      v.run((async () =>
        await anthropic.messages.create({
          model: "smart",
          max_tokens: 10,
          messages: [{ role: "user", content }],
        }))()),
    gemini: async (text = "q") => {
      using _fetch = useGlobalFetch(v);
      return await v.run(
        (async () => await genai.models.generateContent({ model: "smart", contents: text }))(),
      );
    },
  };
}

async function withSessionLimits(run: (v: VirtualGateway, calls: () => number) => Promise<void>) {
  await using v = await startVirtualGateway({ config: ([url]) => config(url!), env: ENV });
  v.ups[0]!.setHandler(() => chatWhole({ text: ["hi"], usage: { input: 60, output: 40 } }));
  await run(v, () => v.ups[0]!.calls.length);
}

const fail = (p: Promise<unknown>) => p.then(() => null, (err: unknown) => err);

Deno.test("session_budget: each SDK raises the third request of a session as a rate-limit error", async () => {
  await withSessionLimits(async (v, calls) => {
    const oai = clients(v, { apiKey: "sk-budget", session: "s-oai" });
    await oai.openai();
    await oai.openai();
    const oaiErr = await fail(oai.openai());
    assert.ok(oaiErr instanceof OpenAI.RateLimitError, String(oaiErr));
    assert.equal(oaiErr.code, "gw.session.budget_exhausted");
    assert.equal(oaiErr.headers?.get("x-should-retry"), "false");
    assert.match(
      oaiErr.message,
      /session 's-oai' of key 'budget' has used its budget of 2 requests/,
    );

    const ant = clients(v, { apiKey: "sk-budget", session: "s-ant" });
    await ant.anthropic();
    await ant.anthropic();
    const antErr = await fail(ant.anthropic());
    assert.ok(antErr instanceof Anthropic.RateLimitError, String(antErr));
    assert.equal(antErr.headers?.get("x-pulsegate-error-code"), "gw.session.budget_exhausted");

    const gem = clients(v, { apiKey: "sk-budget", session: "s-gem" });
    await gem.gemini();
    await gem.gemini();
    const gemErr = await fail(gem.gemini());
    assert.ok(gemErr instanceof ApiError, String(gemErr));
    assert.equal(gemErr.status, 429);
    assert.match(gemErr.message, /RESOURCE_EXHAUSTED/);

    // Another session of the same key starts from zero.
    await clients(v, { apiKey: "sk-budget", session: "s-new" }).openai();
    assert.equal(calls(), 7, "two calls per session, none for a refusal");
    assert.deepEqual(await rowsWith(v, "gw.session.budget_exhausted"), [
      // In the order of their sessions' names.
      ["budget", "s-ant", 429],
      ["budget", "s-gem", 429],
      ["budget", "s-oai", 429],
    ], "each refusal recorded once: the SDKs did not retry");
  });
});

Deno.test("loop_breaker: the third identical body in a session is refused; a new body passes", async () => {
  await withSessionLimits(async (v, calls) => {
    const oai = clients(v, { apiKey: "sk-loop", session: "l-oai" });
    await oai.openai("same");
    await oai.openai("same");
    const oaiErr = await fail(oai.openai("same"));
    assert.ok(oaiErr instanceof OpenAI.RateLimitError, String(oaiErr));
    assert.equal(oaiErr.code, "gw.session.loop_detected");
    const retry = Number(oaiErr.headers?.get("retry-after"));
    assert.ok(retry >= 1 && retry <= 600, `Retry-After ${retry}`);
    await oai.openai("progress");

    const ant = clients(v, { apiKey: "sk-loop", session: "l-ant" });
    await ant.anthropic("same");
    await ant.anthropic("same");
    const antErr = await fail(ant.anthropic("same"));
    assert.ok(antErr instanceof Anthropic.RateLimitError, String(antErr));
    assert.match(antErr.message, /sent 3 times in 600 s in this session/);

    const gem = clients(v, { apiKey: "sk-loop", session: "l-gem" });
    await gem.gemini("same");
    await gem.gemini("same");
    const gemErr = await fail(gem.gemini("same"));
    assert.ok(gemErr instanceof ApiError, String(gemErr));
    assert.equal(gemErr.status, 429);

    // The same body in another session is that session's first.
    await clients(v, { apiKey: "sk-loop", session: "l-other" }).openai("same");
    assert.equal(calls(), 8);
    assert.deepEqual((await rowsWith(v, "gw.session.loop_detected")).map((r) => r[1]), [
      "l-ant",
      "l-gem",
      "l-oai",
    ]);
  });
});

Deno.test("session_budget in USD holds across a restart: history seeds the session's spend", async () => {
  const big = () => chatWhole({ text: ["hi"], usage: { input: 60_000, output: 30_000 } }); // 0.6 + 0.6 USD
  const cfg = ([url]: string[]): ConfigInput => ({
    ...config(url!),
    keys: [{ id: "budget", key_env: "PULSEGATE_KEY_BUDGET", session_budget: { usd: 1 } }],
  });
  const first = await startVirtualGateway({ config: cfg, env: ENV });
  first.ups[0]!.setHandler(big);
  await clients(first, { apiKey: "sk-budget", session: "long" }).openai();
  first.keepDir();
  await first.stop();
  await using v = await startVirtualGateway({ share: first, config: cfg, env: ENV });
  const err = await fail(clients(v, { apiKey: "sk-budget", session: "long" }).openai());
  assert.ok(err instanceof OpenAI.RateLimitError, String(err));
  assert.match(err.message, /budget of 1 USD/);
  assert.equal(v.ups[0]!.calls.length, 1);
});

Deno.test("loop_breaker's window (600 s) end to end: the third copy is refused at 599.999 s after the first, admitted at 600 s", async () => {
  await withSessionLimits(async (v, calls) => {
    const oai = clients(v, { apiKey: "sk-loop", session: "window" });
    // The first copy is counted when admitted, after the session's history was read (real I/O,
    // during which virtual time may pass): the instant its upstream call goes out.
    let firstAt = 0;
    v.ups[0]!.setHandler(() => {
      firstAt ||= v.clock.now();
      return chatWhole({ text: ["hi"], usage: { input: 60, output: 40 } });
    });
    await oai.openai("same");
    await oai.openai("same");
    v.clock.advance(firstAt + 599_999 - v.clock.now());
    const err = await fail(oai.openai("same"));
    assert.ok(err instanceof OpenAI.RateLimitError, String(err));
    assert.equal(err.code, "gw.session.loop_detected");
    v.clock.advance(1);
    await oai.openai("same");
    assert.equal(calls(), 3, "the first copy left the window at 600 s exactly");
  });
});

Deno.test("the loop breaker's window: a copy older than window_secs no longer counts", async () => {
  let now = 1_000_000;
  const clock = { ...systemClock(), now: () => now };
  const limits = new SessionLimits({ db: null, clock });
  const key = {
    id: "k",
    key_env: "K",
    enabled: true,
    loop_breaker: { repeats: 2, window_secs: 10 },
  } as Parameters<typeof limits.admit>[0];
  const digest = () => Promise.resolve("d");
  await limits.admit(key, { sessionId: "s", bodyDigest: digest });
  now += 4_000;
  const err = await limits.admit(key, { sessionId: "s", bodyDigest: digest }).catch((e) => e);
  assert.ok(err instanceof GatewayError);
  assert.equal(err.code, "gw.session.loop_detected");
  assert.equal(err.retryAfterSecs, 6, "frees when the first copy leaves the window");
  now += 6_000;
  await limits.admit(key, { sessionId: "s", bodyDigest: digest });
});

Deno.test("the loop breaker remembers a bounded number of bodies in all: the least recently used sessions' go first", async () => {
  const limits = new SessionLimits({ db: null, clock: systemClock(), maxBodies: 100 });
  const key = {
    id: "k",
    key_env: "K",
    enabled: true,
    loop_breaker: { repeats: 2, window_secs: 3600 },
  } as Parameters<typeof limits.admit>[0];
  const send = (sessionId: string, body: string) =>
    limits.admit(key, { sessionId, bodyDigest: () => Promise.resolve(body) }).then(
      () => "admitted",
      (err: GatewayError) => err.code,
    );
  // 60 bodies in the first session, then 60 in each of two more: 180 sent, 100 remembered.
  for (const session of ["s1", "s2", "s3"]) {
    for (let i = 0; i < 60; i++) assert.equal(await send(session, `${session}-${i}`), "admitted");
  }
  // The newest session still has its bodies; the oldest has lost them, its repeat is admitted.
  assert.equal(await send("s3", "s3-0"), "gw.session.loop_detected");
  assert.equal(await send("s1", "s1-0"), "admitted");
  // Each session keeps at most 64, whatever the bound in all.
  for (let i = 0; i < 70; i++) await send("s4", `s4-${i}`);
  assert.equal(await send("s4", "s4-69"), "gw.session.loop_detected");
  assert.equal(await send("s4", "s4-0"), "admitted");
});
