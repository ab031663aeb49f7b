/**
 * Pools and half-open recovery end to end (docs/design.md "Pools", "Cooldown"): real gateways
 * over real HTTP to fake upstreams; the statistics themselves are in tests/pool_engine_test.ts
 * and tests/half_open_engine_test.ts, in virtual time.
 */
import assert from "node:assert/strict";
import type { ConfigInput } from "../gateway/config/schema.ts";
import type { HealthView } from "../admin/api_types.ts";
import { eventually, postJson, startTestGateway } from "./harness.ts";
import { chatError, chatWholeBody } from "./fake_upstreams/openai_chat_script.ts";
import { chatStream } from "./fake_upstreams/openai_chat_script.ts";
import { type FakeUpstream, startFakeUpstream } from "./fake_upstreams/server.ts";
import { seededRandom } from "./seeded_random.ts";

const ADMIN = { authorization: "Bearer pools-admin" };
const body = { model: "smart", messages: [{ role: "user", content: "hi" }] };

function answering(name: string): FakeUpstream {
  return startFakeUpstream({
    fallback: () =>
      chatStream({ text: [`from ${name}`, " and more"], usage: { input: 3, output: 20 } }),
  });
}

function poolConfig(urls: string[], pool: Record<string, unknown>): ConfigInput {
  return {
    upstreams: urls.map((url, i) => ({
      id: `up${i + 1}`,
      kind: "openai-chat" as const,
      base_url: url,
    })),
    routes: [{
      model: "smart",
      candidates: [{
        ...pool,
        pool: urls.map((_, i) => ({
          upstream: `up${i + 1}`,
          model: `m${i + 1}`,
          weight: i ? 1 : 3,
        })),
      }],
    }],
  } as ConfigInput;
}

async function ask(url: string, headers: Record<string, string> = {}): Promise<string> {
  const res = await postJson(`${url}/v1/chat/completions`, { ...body, stream: true }, headers);
  assert.equal(res.status, 200);
  return await res.text();
}

Deno.test("a weighted pool over HTTP: traffic split 3:1, shares in /metrics and the health API", async () => {
  const ups = [answering("a"), answering("b")];
  const gw = await startTestGateway(poolConfig(ups.map((u) => u.url), {}), {
    random: seededRandom(7),
    env: { PULSEGATE_ADMIN_TOKEN: "pools-admin" },
  });
  try {
    for (let i = 0; i < 60; i++) await ask(gw.url);
    const [a, b] = ups.map((u) => u.calls.length);
    assert.equal(a! + b!, 60);
    assert.ok(Math.abs(a! / 60 - 0.75) <= 0.1, `up1 took ${a}`);
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    const share = (up: string) =>
      Number(
        metrics.match(
          new RegExp(
            `pulsegate_pool_share\\{route="smart",pool="0",upstream="${up}",model="m\\d"\\} (\\S+)`,
          ),
        )?.[1],
      );
    assert.equal(share("up1"), a! / 60);
    assert.equal(share("up2"), b! / 60);
    assert.match(metrics, /pulsegate_upstream_state\{upstream="up1",state="ok"\} 1/);
    assert.match(
      metrics,
      /pulsegate_pool_attempts_total\{route="smart",pool="0",upstream="up1"\} /,
    );
    assert.match(metrics, /pulsegate_upstream_first_content_seconds_count\{upstream="up1"\} /);
    assert.match(metrics, /pulsegate_upstream_content_tokens_per_second_count\{upstream="up1"\} /);

    await gw.writer.flush();
    const health = await (await fetch(`${gw.url}/admin/api/health`, { headers: ADMIN }))
      .json() as HealthView;
    const up1 = health.upstreams.find((u) => u.id === "up1")!;
    assert.equal(up1.state, "ok");
    assert.deepEqual(up1.members.map((m) => [m.model, m.state]), [["m1", "ok"]]);
    assert.deepEqual(
      up1.members[0]!.pools.map((p) => [p.route, p.index, p.pick, p.weight, p.share]),
      [["smart", 0, "weighted", 3, a! / 60]],
    );
    assert.equal(up1.recent.errorRate, 0);
    assert.ok(up1.recent.tokensPerSecP50 !== null && up1.recent.tokensPerSecP50 > 0);
  } finally {
    await gw.stop();
    for (const up of ups) await up.close();
  }
});

Deno.test("a pool over HTTP: a session stays on its member across turns", async () => {
  const ups = [answering("a"), answering("b"), answering("c")];
  const gw = await startTestGateway(poolConfig(ups.map((u) => u.url), {}), {
    random: seededRandom(3),
  });
  try {
    const answers = new Set<string>();
    for (let i = 0; i < 12; i++) {
      const text = await ask(gw.url, { "x-session-id": "conversation-1" });
      answers.add(text.match(/from (\w)/)![1]!);
    }
    assert.equal(answers.size, 1, `the session moved between ${[...answers]}`);
    assert.deepEqual(ups.map((u) => u.calls.length).toSorted(), [0, 0, 12]);
  } finally {
    await gw.stop();
    for (const up of ups) await up.close();
  }
});

Deno.test("two instances on one database: exactly one probe reaches an upstream whose pause ended", async () => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  // The recovering upstream answers only when the test says: the probe is out meanwhile.
  const recovering = startFakeUpstream({
    fallback: () => ({ body: [{ until: held }, { send: chatWholeBody({ text: ["back"] }) }] }),
  });
  const healthy = startFakeUpstream({
    fallback: () => ({ body: [{ send: chatWholeBody({ text: ["fallback"] }) }] }),
  });
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-probe-" });
  // Scale 0.01: heartbeats 100 ms apart; the 120 s pause lasts 1.2 s.
  const config: ConfigInput = {
    failover: { pause_secs: 120, idle_timeout_secs: 3600 },
    upstreams: [
      { id: "up1", kind: "openai-chat", base_url: recovering.url },
      { id: "up2", kind: "openai-chat", base_url: healthy.url },
    ],
    routes: [{
      model: "smart",
      candidates: [{ upstream: "up1", model: "m1" }, { upstream: "up2", model: "m2" }],
    }],
  };
  const a = await startTestGateway(config, { dir });
  const b = await startTestGateway(undefined, { dir });
  try {
    for (let i = 0; i < 3; i++) a.cooldowns.failure("up1", "gw.upstream.error");
    // b learns of the pause at its next heartbeat, and both see it end.
    await eventually(() => b.cooldowns.phase("up1") === "paused", { what: "b sees the pause" });
    await eventually(() => a.cooldowns.halfOpen("up1") && b.cooldowns.halfOpen("up1"), {
      what: "the pause ends on both",
    });
    const sent = [a, b].flatMap((gw) =>
      Array.from({ length: 5 }, () => postJson(`${gw.url}/v1/chat/completions`, body))
    );
    await eventually(() => healthy.calls.length === 9, { what: "nine requests went on" });
    assert.equal(recovering.calls.length, 1, "one probe, from one of the two instances");
    release();
    const statuses = await Promise.all(sent.map(async (r) => {
      const res = await r;
      await res.body?.cancel();
      return res.status;
    }));
    assert.deepEqual(statuses, Array(10).fill(200));
    assert.equal(recovering.calls.length, 1);
    // The probe's success closes it, there and (at the next heartbeat) on the other instance.
    await eventually(() => a.cooldowns.phase("up1") === "ok" && b.cooldowns.phase("up1") === "ok", {
      what: "both see it closed",
    });
  } finally {
    release();
    await a.stop();
    await b.stop();
    await recovering.close();
    await healthy.close();
  }
});

/** One upstream serving two models, `cheap` and `dear`, in one `cheapest` pool of route `smart`. */
function cheapAndDear(url: string): ConfigInput {
  return {
    upstreams: [{
      id: "up1",
      kind: "openai-chat",
      base_url: url,
      prices: { cheap: { input: 0.1, output: 0.2 }, dear: { input: 3, output: 15 } },
    }],
    routes: [{
      model: "smart",
      candidates: [{
        pick: "cheapest",
        pool: [{ upstream: "up1", model: "cheap" }, { upstream: "up1", model: "dear" }],
      }],
    }],
  };
}

Deno.test("a cheapest pool on one upstream: the member whose model fails is paused alone; the other takes the traffic", async () => {
  // One upstream serving two models: `cheap` always fails with 503, `dear` answers.
  const up = startFakeUpstream({
    fallback: (call) =>
      (call.json as { model?: string }).model === "cheap"
        ? chatError(503, "cheap is down")
        : chatStream({ text: ["from dear"], usage: { input: 3, output: 5 } }),
  });
  // A pause far longer than ten requests on a loaded machine (600 s is 6 s at the test scale):
  // the default 60 s (0.6 s) could end mid-test and let a half-open probe reach `cheap`.
  const config: ConfigInput = { failover: { pause_secs: 600 }, ...cheapAndDear(up.url) };
  const gw = await startTestGateway(config, { env: { PULSEGATE_ADMIN_TOKEN: "pools-admin" } });
  try {
    for (let i = 0; i < 10; i++) assert.match(await ask(gw.url), /from dear/);
    const calls = (model: string) =>
      up.calls.filter((c) => (c.json as { model?: string }).model === model).length;
    // The first request pays a try and a retry, the second the third failure (which pauses the
    // member) and its retry; from then on `cheapest` goes straight to the member that answers.
    assert.equal(calls("cheap"), 4);
    assert.equal(calls("dear"), 10);

    const health = await (await fetch(`${gw.url}/admin/api/health`, { headers: ADMIN }))
      .json() as HealthView;
    const up1 = health.upstreams.find((u) => u.id === "up1")!;
    assert.equal(up1.state, "ok", "the upstream as a whole is healthy");
    const member = (model: string) => up1.members.find((m) => m.model === model)!;
    assert.equal(member("cheap").state, "paused");
    assert.match(member("cheap").pauseReason!, /3 failures in a row; last: gw.upstream.error/);
    assert.equal(member("dear").state, "ok");
    assert.equal(member("dear").consecutiveFailures, 0);
    assert.deepEqual(member("cheap").pools.map((p) => [p.route, p.pick, p.share]), [
      ["smart", "cheapest", 4 / 14],
    ]);
    assert.deepEqual(member("dear").pools.map((p) => p.share), [10 / 14]);
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    assert.match(
      metrics,
      /pulsegate_member_state\{upstream="up1",model="cheap",state="paused"\} 1/,
    );
    assert.match(metrics, /pulsegate_member_state\{upstream="up1",model="dear",state="ok"\} 1/);
    assert.match(metrics, /pulsegate_upstream_state\{upstream="up1",state="ok"\} 1/);

    // The operator's Resume of the upstream clears its members' pauses too.
    const resumed = await fetch(`${gw.url}/admin/api/upstreams/up1/resume`, {
      method: "POST",
      headers: { ...ADMIN, "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(resumed.status, 200);
    await resumed.body?.cancel();
    assert.equal(gw.cooldowns.phase("up1/cheap"), "ok");
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("a pool member whose model the upstream says is not there: the next member answers at once, that member alone is charged; a route of it alone passes the 404 on", async () => {
  const notThere = (model: string) => ({
    status: 404,
    body: [{
      send: JSON.stringify({
        error: {
          message: `The model \`${model}\` does not exist or you do not have access to it.`,
          type: "invalid_request_error",
          param: null,
          code: "model_not_found",
        },
      }),
    }],
  });
  const up = startFakeUpstream({
    fallback: (call) => {
      const model = (call.json as { model?: string }).model ?? "";
      return model === "gone" ? notThere(model) : chatStream({ text: [`from ${model}`] });
    },
  });
  const config: ConfigInput = {
    upstreams: [{
      id: "up1",
      kind: "openai-chat",
      base_url: up.url,
      prices: { gone: { input: 0.1, output: 0.2 }, here: { input: 3, output: 15 } },
    }],
    routes: [
      {
        model: "smart",
        candidates: [{
          pick: "cheapest",
          pool: [{ upstream: "up1", model: "gone" }, { upstream: "up1", model: "here" }],
        }],
      },
      { model: "only-gone", candidates: [{ upstream: "up1", model: "gone" }] },
    ],
  };
  const gw = await startTestGateway(config);
  try {
    const gone = () => up.calls.filter((c) => (c.json as { model?: string }).model === "gone");
    for (let i = 0; i < 6; i++) assert.match(await ask(gw.url), /from here/);
    assert.equal(gone().length, 3, "once a request, never retried, until three pause it");
    assert.equal(gw.cooldowns.phase("up1/gone"), "paused");
    assert.equal(gw.cooldowns.get("up1").consecutiveFailures, 0, "not the upstream's fault");
    assert.equal(gw.cooldowns.phase("up1"), "ok");
    assert.equal(gw.cooldowns.phase("up1/here"), "ok");

    const res = await postJson(`${gw.url}/v1/chat/completions`, { ...body, model: "only-gone" });
    assert.equal(res.status, 404, "the provider's answer, as before, when nothing else can answer");
    assert.equal((await res.json()).error.code, "model_not_found");
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("two instances on one database: a member paused on one is passed over by the other from its next heartbeat; their upstream stays open", async () => {
  const up = startFakeUpstream({
    fallback: (call) => chatStream({ text: [`from ${(call.json as { model?: string }).model}`] }),
  });
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-member-" });
  // Scale 0.01: heartbeats 100 ms apart; the 600 s pause lasts 6 s, longer than the test.
  const config: ConfigInput = { failover: { pause_secs: 600 }, ...cheapAndDear(up.url) };
  const a = await startTestGateway(config, { dir });
  const b = await startTestGateway(undefined, { dir });
  try {
    assert.match(await ask(b.url), /from cheap/);
    for (let i = 0; i < 3; i++) a.cooldowns.failure("up1/cheap", "gw.upstream.error");
    await eventually(() => b.cooldowns.phase("up1/cheap") === "paused", {
      what: "b reads the member's pause",
    });
    const before = up.calls.length;
    for (let i = 0; i < 3; i++) assert.match(await ask(b.url), /from dear/);
    assert.equal(up.calls.length - before, 3, "no call to the paused member");
    assert.equal(b.cooldowns.phase("up1"), "ok");
    assert.equal(b.cooldowns.phase("up1/dear"), "ok");
  } finally {
    await a.stop();
    await b.stop();
    await up.close();
  }
});
