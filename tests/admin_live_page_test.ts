import assert from "node:assert/strict";
import type { LiveSnapshot } from "../admin/api_types.ts";
import { LIVE_FEEDS_MAX } from "../admin/live_api.ts";
import { LIVE_PAGE_MAX } from "../admin/live_query.ts";
import { createSseParser } from "../admin/client/sse_parser.ts";
import { ADMIN, adminFetch, streamingRequest } from "./admin_helpers.ts";
import { contentThenSilence } from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";
import { chatRoute, startTestGateway, type TestGateway } from "./harness.ts";

/**
 * docs/admin.md "Live requests": the gateway filters, searches, orders and pages the live list,
 * so what a tab receives per tick follows the page, not the number of running requests.
 */

const HELD = LIVE_PAGE_MAX + 30;
// 36 s at the test scale: every held stream outlives the test.
const patient = { idle_timeout_secs: 3600, retries_per_candidate: 0 };

async function snapshot(gw: TestGateway, query = ""): Promise<LiveSnapshot> {
  const res = await adminFetch(gw, `/admin/api/live/snapshot${query}`);
  assert.equal(res.status, 200, await res.clone().text());
  return await res.json();
}

/** The feed's events, with each event's size in bytes, until `n` arrived. */
async function feedEvents(
  gw: TestGateway,
  opts: { query?: string; n: number },
): Promise<{ event: string; bytes: number; data: string }[]> {
  const res = await adminFetch(gw, `/admin/api/live${opts.query ?? ""}`);
  assert.equal(res.status, 200);
  const events: { event: string; bytes: number; data: string }[] = [];
  const parse = createSseParser((e) =>
    events.push({ event: e.event, data: e.data, bytes: new TextEncoder().encode(e.data).length })
  );
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  try {
    while (events.length < opts.n) {
      const { value, done } = await reader.read();
      if (done) break;
      parse(value);
    }
  } finally {
    await reader.cancel();
  }
  return events;
}

Deno.test("live list: the gateway filters, searches, orders and pages; a tab gets a page and heartbeats", async () => {
  const up = startFakeUpstream({ fallback: () => contentThenSilence("partial") });
  const config = chatRoute([up.url], { failover: patient });
  const gw = await startTestGateway({
    ...config,
    upstreams: config.upstreams.map((u) => ({ ...u, max_in_flight: HELD })),
  }, { env: { PULSEGATE_ADMIN_TOKEN: ADMIN } });
  const streams: Promise<string>[] = [];
  try {
    for (let i = 0; i < HELD; i++) {
      const { rest } = await streamingRequest(gw, {
        "x-request-id": `held-${String(i).padStart(3, "0")}`,
        "x-session-id": i === 77 ? "the-stuck-one" : `chat-${i % 4}`,
      });
      streams.push(rest.catch(String));
    }
    const first = await snapshot(gw);
    assert.equal(first.requests.length, LIVE_PAGE_MAX, "one page by default");
    assert.deepEqual(first.totals, {
      running: HELD,
      matching: HELD,
      states: { streaming: HELD },
    });
    assert.equal(first.requests[0]?.id, "held-000", "oldest first");
    assert.equal(first.instances.total, 1);
    assert.equal(first.requests[0]?.instance, first.instances.ids[0]);
    const next = await snapshot(gw, `?after=${encodeURIComponent(first.page.next!)}`);
    assert.equal(next.page.offset, LIVE_PAGE_MAX);
    assert.equal(next.requests.length, HELD - LIVE_PAGE_MAX);
    assert.equal(next.page.next, null);

    const found = await snapshot(gw, "?q=stuck");
    assert.deepEqual(found.requests.map((r) => r.id), ["held-077"], "by session id");
    assert.equal(found.totals.matching, 1);
    assert.equal(found.totals.running, HELD, "the count line says how many run");
    assert.deepEqual((await snapshot(gw, "?q=held-12")).requests.map((r) => r.id), [
      "held-120",
      "held-121",
      "held-122",
      "held-123",
      "held-124",
      "held-125",
      "held-126",
      "held-127",
      "held-128",
      "held-129",
    ]);
    const newest = await snapshot(gw, "?sort=newest&limit=2&session=chat-1");
    assert.deepEqual(newest.requests.map((r) => r.id), ["held-129", "held-125"]);
    assert.equal(newest.totals.matching, 32);

    for (
      const bad of [`?limit=${LIVE_PAGE_MAX + 1}`, `?q=${"x".repeat(201)}`, "?sort=random"]
    ) {
      const res = await adminFetch(gw, `/admin/api/live/snapshot${bad}`);
      assert.equal(res.status, 400, bad);
      assert.equal((await res.json()).error.code, "admin.bad_query");
    }
    const anonymous = await adminFetch(gw, "/admin/api/live/snapshot?q=held", { token: null });
    assert.equal(anonymous.status, 401, "no live data without the admin token");

    // A full page per snapshot, well under 64 KiB, and heartbeats while nothing moves.
    const events = await feedEvents(gw, { n: 4 });
    assert.equal(events[0]?.event, "snapshot");
    assert.ok(events[0]!.bytes <= 64 * 1024, `${events[0]!.bytes} bytes`);
    assert.ok(events.slice(1).some((e) => e.event === "heartbeat"), JSON.stringify(events));
    for (const e of events.filter((e) => e.event === "heartbeat")) {
      assert.ok(e.bytes < 64, "a heartbeat is a timestamp");
      assert.ok(Number.isFinite(JSON.parse(e.data).at));
    }
    const small = await feedEvents(gw, { query: "?limit=5", n: 1 });
    assert.ok(small[0]!.bytes < events[0]!.bytes / 10, "the bytes follow the page size");
  } finally {
    // Stopping the gateway ends the held streams.
    await gw.stop();
    await Promise.all(streams);
    await up.close();
  }
});

Deno.test("live list: one process serves a bounded number of open feeds", async () => {
  const up = startFakeUpstream();
  const gw = await startTestGateway(chatRoute([up.url]), { env: { PULSEGATE_ADMIN_TOKEN: ADMIN } });
  const open: Response[] = [];
  try {
    for (let i = 0; i < LIVE_FEEDS_MAX; i++) {
      const res = await adminFetch(gw, "/admin/api/live");
      assert.equal(res.status, 200);
      open.push(res);
    }
    const refused = await adminFetch(gw, "/admin/api/live");
    assert.equal(refused.status, 503);
    assert.equal((await refused.json()).error.code, "admin.live_feeds_full");
    await open.pop()!.body!.cancel();
    // The closed tab's place is free again once the gateway saw it go.
    let again: Response | null = null;
    for (let i = 0; i < 100 && again?.status !== 200; i++) {
      await again?.body?.cancel();
      await new Promise((r) => setTimeout(r, 20));
      again = await adminFetch(gw, "/admin/api/live");
    }
    assert.equal(again?.status, 200);
    open.push(again!);
  } finally {
    for (const res of open) await res.body?.cancel();
    await gw.stop();
    await up.close();
  }
});
