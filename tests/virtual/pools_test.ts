/**
 * Pools and half-open recovery end to end (docs/design.md "Pools", "Cooldown"): whole gateways
 * in virtual time (two on one database where instances must agree), at the real defaults (a
 * 60 s pause, heartbeats 10 s apart); the statistics themselves are in
 * tests/pool_engine_test.ts and tests/half_open_engine_test.ts.
 */
import assert from "node:assert/strict";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import type { HealthView } from "../../admin/api_types.ts";
import { HEARTBEAT_MS } from "../../gateway/live/heartbeat_timing.ts";
import { startVirtualGateway, type VirtualGateway } from "../virtual_gateway.ts";
import { chatError, chatWholeBody } from "../fake_upstreams/openai_chat_script.ts";
import { chatStream } from "../fake_upstreams/openai_chat_script.ts";
import type { FakeUpstream } from "../fake_upstreams/server.ts";
import { seededRandom } from "../seeded_random.ts";

const ADMIN = { authorization: "Bearer pools-admin" };
const body = { model: "smart", messages: [{ role: "user", content: "hi" }] };
const CHAT = "/v1/chat/completions";

function answering(up: FakeUpstream, name: string): void {
  // A second between pieces: an answer's tokens per second after its first content is measured.
  up.setHandler(() =>
    chatStream({ text: [`from ${name}`, " and more"], usage: { input: 3, output: 20 } }, {
      gap: 1_000,
    })
  );
}

/** A GET or POST to the gateway's own API, its JSON (or text), in virtual time. */
async function api(
  v: VirtualGateway,
  path: string,
  init: RequestInit = {},
): Promise<{ status: number; text: string }> {
  return await v.run((async () => {
    const res = await v.fetch(`http://127.0.0.1${path}`, init);
    return { status: res.status, text: await res.text() };
  })());
}

/** Waits in virtual time, a second at a time, until `check` holds (at most ten minutes). */
async function waitFor(v: VirtualGateway, check: () => boolean, what: string): Promise<void> {
  await v.run((async () => {
    for (let s = 0; !check(); s++) {
      if (s > 600) throw new Error(`not met: ${what}`);
      await v.clock.sleep(1_000);
    }
  })());
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

async function ask(v: VirtualGateway, headers: Record<string, string> = {}): Promise<string> {
  const got = await v.send(CHAT, { ...body, stream: true }, { headers });
  assert.equal(got.status, 200);
  return got.text;
}

Deno.test("a weighted pool: traffic split 3:1, shares in /metrics and the health API", async () => {
  await using v = await startVirtualGateway({
    upstreams: 2,
    config: (urls) => poolConfig(urls, {}),
    random: seededRandom(7),
    env: { PULSEGATE_ADMIN_TOKEN: "pools-admin" },
  });
  answering(v.ups[0]!, "a");
  answering(v.ups[1]!, "b");
  for (let i = 0; i < 60; i++) await ask(v);
  const [a, b] = v.ups.map((u) => u.calls.length);
  assert.equal(a! + b!, 60);
  assert.ok(Math.abs(a! / 60 - 0.75) <= 0.1, `up1 took ${a}`);
  const metrics = (await api(v, "/metrics")).text;
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
  assert.match(metrics, /pulsegate_pool_attempts_total\{route="smart",pool="0",upstream="up1"\} /);
  assert.match(metrics, /pulsegate_upstream_first_content_seconds_count\{upstream="up1"\} /);
  assert.match(metrics, /pulsegate_upstream_content_tokens_per_second_count\{upstream="up1"\} /);

  await v.run(v.gw.writer.flush());
  const health = JSON.parse(
    (await api(v, "/admin/api/health", { headers: ADMIN })).text,
  ) as HealthView;
  const up1 = health.upstreams.find((u) => u.id === "up1")!;
  assert.equal(up1.state, "ok");
  assert.deepEqual(up1.members.map((m) => [m.model, m.state]), [["m1", "ok"]]);
  assert.deepEqual(
    up1.members[0]!.pools.map((p) => [p.route, p.index, p.pick, p.weight, p.share]),
    [["smart", 0, "weighted", 3, a! / 60]],
  );
  assert.equal(up1.recent.errorRate, 0);
  assert.ok(up1.recent.tokensPerSecP50 !== null && up1.recent.tokensPerSecP50 > 0);
});

Deno.test("a pool: a session stays on its member across turns", async () => {
  await using v = await startVirtualGateway({
    upstreams: 3,
    config: (urls) => poolConfig(urls, {}),
    random: seededRandom(3),
  });
  v.ups.forEach((up, i) => answering(up, "abc"[i]!));
  const answers = new Set<string>();
  for (let i = 0; i < 12; i++) {
    const text = await ask(v, { "x-session-id": "conversation-1" });
    answers.add(text.match(/from (\w)/)![1]!);
  }
  assert.equal(answers.size, 1, `the session moved between ${[...answers]}`);
  assert.deepEqual(v.ups.map((u) => u.calls.length).toSorted(), [0, 0, 12]);
});

Deno.test("two instances on one database: exactly one probe reaches an upstream whose pause ended, 60 s after it began", async () => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const config: ConfigInput = {
    failover: { idle_timeout_secs: 3600 },
    upstreams: [
      { id: "up1", kind: "openai-chat", base_url: "http://up1.upstream.test" },
      { id: "up2", kind: "openai-chat", base_url: "http://up2.upstream.test" },
    ],
    routes: [{
      model: "smart",
      candidates: [{ upstream: "up1", model: "m1" }, { upstream: "up2", model: "m2" }],
    }],
  };
  await using a = await startVirtualGateway({ upstreams: 2, config: () => config });
  await using b = await startVirtualGateway({ share: a, config: () => undefined });
  const [recovering, healthy] = a.ups;
  // The recovering upstream answers only when the test says: the probe is out meanwhile.
  recovering!.setHandler(() => ({
    body: [{ until: held }, { send: chatWholeBody({ text: ["back"] }) }],
  }));
  healthy!.setHandler(() => ({ body: [{ send: chatWholeBody({ text: ["fallback"] }) }] }));
  for (let i = 0; i < 3; i++) a.gw.cooldowns.failure("up1", "gw.upstream.error");
  const pausedAt = a.clock.now();
  assert.equal(a.gw.cooldowns.get("up1").pausedUntil! - pausedAt, 60_000);
  // b learns of the pause at its next heartbeat, at most 10 s on.
  await waitFor(a, () => b.gw.cooldowns.phase("up1") === "paused", "b sees the pause");
  // The heartbeat at 10 s reads the database (real I/O): the look a second later sees it.
  assert.ok(a.clock.elapsed(pausedAt) <= HEARTBEAT_MS + 1_000, `${a.clock.elapsed(pausedAt)} ms`);
  // Both see it end at 60 s, not a millisecond before.
  a.clock.advance(pausedAt + 60_000 - 1 - a.clock.now());
  assert.equal(a.gw.cooldowns.halfOpen("up1") || b.gw.cooldowns.halfOpen("up1"), false);
  a.clock.advance(1);
  assert.equal(a.gw.cooldowns.halfOpen("up1") && b.gw.cooldowns.halfOpen("up1"), true);
  const statuses = await a.run((async () => {
    const sent = [a, b].flatMap((gw) => Array.from({ length: 5 }, () => gw.exchange(CHAT, body)));
    await a.until(() => healthy!.calls.length === 9, "nine requests went on");
    assert.equal(recovering!.calls.length, 1, "one probe, from one of the two instances");
    release();
    return (await Promise.all(sent)).map((r) => r.status);
  })());
  assert.deepEqual(statuses, Array(10).fill(200));
  assert.equal(recovering!.calls.length, 1);
  // The probe's success closes it, there and (at the next heartbeat) on the other instance.
  await waitFor(
    a,
    () => a.gw.cooldowns.phase("up1") === "ok" && b.gw.cooldowns.phase("up1") === "ok",
    "both see it closed",
  );
  release();
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
  await using v = await startVirtualGateway({
    config: ([url]) => cheapAndDear(url!),
    env: { PULSEGATE_ADMIN_TOKEN: "pools-admin" },
  });
  const up = v.ups[0]!;
  up.setHandler((call) =>
    (call.json as { model?: string }).model === "cheap"
      ? chatError(503, "cheap is down")
      : chatStream({ text: ["from dear"], usage: { input: 3, output: 5 } })
  );
  for (let i = 0; i < 10; i++) assert.match(await ask(v), /from dear/);
  const calls = (model: string) =>
    up.calls.filter((c) => (c.json as { model?: string }).model === model).length;
  // The first request pays a try and a retry, the second the third failure (which pauses the
  // member) and its retry; from then on `cheapest` goes straight to the member that answers,
  // all well inside the 60 s pause (each request takes 0.5 s at most).
  assert.ok(v.clock.sinceStart < 60_000);
  assert.equal(calls("cheap"), 4);
  assert.equal(calls("dear"), 10);

  const health = JSON.parse(
    (await api(v, "/admin/api/health", { headers: ADMIN })).text,
  ) as HealthView;
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
  const metrics = (await api(v, "/metrics")).text;
  assert.match(metrics, /pulsegate_member_state\{upstream="up1",model="cheap",state="paused"\} 1/);
  assert.match(metrics, /pulsegate_member_state\{upstream="up1",model="dear",state="ok"\} 1/);
  assert.match(metrics, /pulsegate_upstream_state\{upstream="up1",state="ok"\} 1/);

  // The operator's Resume of the upstream clears its members' pauses too.
  const resumed = await api(v, "/admin/api/upstreams/up1/resume", {
    method: "POST",
    headers: { ...ADMIN, "content-type": "application/json" },
    body: "{}",
  });
  assert.equal(resumed.status, 200);
  assert.equal(v.gw.cooldowns.phase("up1/cheap"), "ok");
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
  await using v = await startVirtualGateway({
    config: ([url]) => ({
      upstreams: [{
        id: "up1",
        kind: "openai-chat",
        base_url: url!,
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
    }),
  });
  const up = v.ups[0]!;
  up.setHandler((call) => {
    const model = (call.json as { model?: string }).model ?? "";
    return model === "gone" ? notThere(model) : chatStream({ text: [`from ${model}`] });
  });
  const gone = () => up.calls.filter((c) => (c.json as { model?: string }).model === "gone");
  for (let i = 0; i < 6; i++) {
    const got = await v.send(CHAT, { ...body, stream: true });
    assert.match(got.text, /from here/);
    assert.equal(got.headersAt, 0, "at once: a missing model is not retried after a backoff");
  }
  assert.equal(gone().length, 3, "once a request, never retried, until three pause it");
  assert.equal(v.gw.cooldowns.phase("up1/gone"), "paused");
  assert.equal(v.gw.cooldowns.get("up1").consecutiveFailures, 0, "not the upstream's fault");
  assert.equal(v.gw.cooldowns.phase("up1"), "ok");
  assert.equal(v.gw.cooldowns.phase("up1/here"), "ok");

  const res = await v.send(CHAT, { ...body, model: "only-gone" });
  assert.equal(res.status, 404, "the provider's answer, as before, when nothing else can answer");
  assert.equal(JSON.parse(res.text).error.code, "model_not_found");
});

Deno.test("two instances on one database: a member paused on one is passed over by the other from its next heartbeat; their upstream stays open", async () => {
  const config: ConfigInput = cheapAndDear("http://up1.upstream.test");
  await using a = await startVirtualGateway({ config: () => config });
  await using b = await startVirtualGateway({ share: a, config: () => undefined });
  const up = a.ups[0]!;
  up.setHandler((call) =>
    chatStream({ text: [`from ${(call.json as { model?: string }).model}`] })
  );
  assert.match(await ask(b), /from cheap/);
  for (let i = 0; i < 3; i++) a.gw.cooldowns.failure("up1/cheap", "gw.upstream.error");
  const pausedAt = a.clock.now();
  await waitFor(a, () => b.gw.cooldowns.phase("up1/cheap") === "paused", "b reads the pause");
  // The heartbeat at 10 s reads the database (real I/O): the look a second later sees it.
  assert.ok(a.clock.elapsed(pausedAt) <= HEARTBEAT_MS + 1_000, `${a.clock.elapsed(pausedAt)} ms`);
  const before = up.calls.length;
  for (let i = 0; i < 3; i++) assert.match(await ask(b), /from dear/);
  assert.equal(up.calls.length - before, 3, "no call to the paused member");
  assert.equal(b.gw.cooldowns.phase("up1"), "ok");
  assert.equal(b.gw.cooldowns.phase("up1/dear"), "ok");
});
