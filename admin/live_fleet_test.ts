import assert from "node:assert/strict";
import { VirtualClock } from "../tests/virtual_clock.ts";
import type { Clock } from "../gateway/runtime/clock.ts";
import { openDatabase } from "../db/client.ts";
import { migrate } from "../db/migrate.ts";
import { registerInstance } from "../db/instances.ts";
import { LiveRequest } from "../gateway/live/live_request.ts";
import { verifyPeerCall } from "../gateway/live/peer_signature.ts";
import { Metrics } from "../gateway/runtime/metrics.ts";
import type { LiveSnapshot } from "./api_types.ts";
import { liveEvents } from "./live_events.ts";
import { LIVE_PEER_PATH, LIVE_PEER_QUIET_MS, LiveFleet, type LiveFleetDeps } from "./live_fleet.ts";
import { livePart } from "./live_part.ts";
import { LIVE_PEER_ANSWER_MAX_BYTES } from "./live_peer_answer.ts";
import { parseLiveQuery } from "./live_query.ts";
import { createSseParser } from "./client/sse_parser.ts";

const SECRET = "fleet-secret";

async function fleetOf(clock: Clock, peers: Record<string, string>) {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-live-fleet-" });
  const db = await openDatabase(`file:${dir}/pulsegate.db`);
  await migrate(db);
  for (const [id, url] of Object.entries(peers)) {
    await registerInstance(db, id, { now: clock.now(), url });
  }
  return db;
}

/**
 * A clock whose timers fire only when the test says: the peers' answers are real async work
 * (a database read, WebCrypto, fake fetches), so the test waits for them in real time and then
 * lets the bound pass.
 */
class HeldClock implements Clock {
  at = 1_700_000_000_000;
  timers = new Set<() => void>();
  now = () => this.at;
  after(_ms: number, fn: () => void): () => void {
    this.timers.add(fn);
    return () => this.timers.delete(fn);
  }
  sleep(): Promise<void> {
    return Promise.reject(new Error("not used"));
  }
  deadline = (ms: number) => this.at + ms;
  elapsed = (since: number, until = this.at) => until - since;
  /** Lets every pending wait pass. */
  fire(): void {
    const due = [...this.timers];
    this.timers.clear();
    for (const fn of due) fn();
  }
}

async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !done(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(done(), "the peers' calls were made and answered");
}

Deno.test("fleet: a good peer's share is used; a hung, a hostile and a refusing one are skipped, logged, counted", async () => {
  const clock = new HeldClock();
  const db = await fleetOf(clock, {
    b2: "http://b.test",
    c3: "http://c.test",
    d4: "http://d.test",
    e5: "http://e.test",
  });
  const sink = { writeRequest() {}, writeAttempt() {} };
  const onB = [
    new LiveRequest({
      id: "stuck-1",
      instanceId: "b2",
      clientFormat: "openai-chat",
      route: "smart",
      stream: true,
      keyId: null,
      sessionId: null,
    }, { clock, sink, metrics: new Metrics() }),
  ];
  const asked: string[] = [];
  let hung = 0;
  const fakeFetch = async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(String(input));
    asked.push(url.host);
    const body = String(init?.body);
    const headers = new Headers(init?.headers);
    assert.equal(url.pathname, LIVE_PEER_PATH);
    assert.ok(
      await verifyPeerCall({ method: "POST", path: LIVE_PEER_PATH, body, headers }, {
        secret: SECRET,
        now: clock.now(),
      }),
      "signed with the peer secret",
    );
    const call = JSON.parse(body);
    if (url.host === "b.test") {
      const parsed = parseLiveQuery(call.query);
      assert.ok(parsed.ok);
      return Response.json(
        livePart(onB, { query: parsed.query, now: clock.now(), instance: "b2" }),
      );
    }
    if (url.host === "c.test") {
      // Hangs until the asker gives up.
      hung++;
      return await new Promise<Response>((_, reject) =>
        init?.signal?.addEventListener("abort", () => reject(init.signal?.reason))
      );
    }
    if (url.host === "d.test") {
      return new Response("[".repeat(10) + " ".repeat(LIVE_PEER_ANSWER_MAX_BYTES));
    }
    return Response.json({ error: "no" }, { status: 401 });
  };
  const events: string[] = [];
  const metrics = new Metrics();
  const deps: LiveFleetDeps = {
    db,
    instanceId: "a1",
    clock,
    waits: clock,
    fetch: fakeFetch as typeof fetch,
    log: { event: (name, fields) => events.push(`${name} ${fields?.instance} ${fields?.outcome}`) },
    metrics,
    peerSecret: SECRET,
    publicUrl: "http://a.test",
  };
  const answered = () =>
    ["ok", "bad", "refused"].reduce(
      (n, outcome) => n + metrics.livePeerAnswers.get({ outcome }),
      0,
    );
  try {
    const fleet = new LiveFleet(deps);
    const parsed = parseLiveQuery({ q: "stuck" });
    assert.ok(parsed.ok);
    const asking = fleet.ask(parsed.query, { signal: new AbortController().signal });
    await until(() => answered() === 3 && hung === 1);
    let settled = false;
    void asking.then(() => (settled = true));
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(settled, false, "the hung peer is waited for, up to the bound");
    clock.fire(); // LIVE_PEER_ANSWER_MS passes
    const first = await asking;
    assert.deepEqual(first.parts.map((p) => p.rows.map((r) => r.id)), [["stuck-1"]]);
    assert.deepEqual(first.peers, ["b2", "c3", "d4", "e5"]);
    assert.deepEqual(first.silent, ["c3", "d4", "e5"]);
    assert.deepEqual(events.sort(), [
      "live.peer_skipped c3 silent",
      "live.peer_skipped d4 bad",
      "live.peer_skipped e5 refused",
    ]);
    for (const [outcome, n] of [["ok", 1], ["silent", 1], ["bad", 1], ["refused", 1]] as const) {
      assert.equal(metrics.livePeerAnswers.get({ outcome }), n, outcome);
    }
    assert.match(metrics.render(), /pulsegate_live_peer_answers_total\{outcome="bad"\} 1/);
    // The skipped ones are left alone for a while, and still shown as not answering.
    asked.length = 0;
    const again = await fleet.ask(parsed.query, { signal: new AbortController().signal });
    assert.deepEqual(asked, ["b.test"]);
    assert.deepEqual(again.silent, ["c3", "d4", "e5"]);
    clock.at += LIVE_PEER_QUIET_MS;
    asked.length = 0;
    const third = fleet.ask(parsed.query, { signal: new AbortController().signal });
    await until(() => hung === 2);
    clock.fire();
    await third;
    assert.deepEqual(asked.sort(), ["b.test", "c.test", "d.test", "e.test"]);
    // Without the peer settings nobody is asked: the others are shown as not answering.
    const off = new LiveFleet({ ...deps, peerSecret: undefined });
    asked.length = 0;
    const alone = await off.ask(parsed.query, { signal: new AbortController().signal });
    assert.deepEqual([asked, alone.silent], [[], ["b2", "c3", "d4", "e5"]]);
  } finally {
    db.close();
  }
});

Deno.test("live feed: a tick whose page did not change sends only a heartbeat", async () => {
  const clock = new VirtualClock();
  let version = 0;
  const snapshot = (): Promise<LiveSnapshot> => {
    const at = clock.now();
    return Promise.resolve({
      at,
      requests: [{
        id: "r1",
        instance: "a1",
        sessionId: null,
        keyId: null,
        clientFormat: "openai-chat",
        route: "smart",
        stream: true,
        upstream: "up1",
        hop: 1,
        state: "streaming",
        startedAt: 1_000,
        elapsedMs: at - 1_000,
        idleMs: at - 2_000,
        firstContentMs: 1_000,
        inputTokens: null,
        outputTokens: version,
        aborting: false,
      }],
      totals: { running: 1, matching: 1, states: { streaming: 1 } },
      page: { sort: "oldest", offset: 0, limit: 100, next: null },
      instances: { total: 1, ids: ["a1"], silent: [] },
      choices: { routes: [], upstreams: [] },
    });
  };
  const tab = new AbortController();
  let ended = 0;
  const stream = liveEvents({
    clock,
    snapshot,
    stopping: () => false,
    signal: tab.signal,
    onEnd: () => ended++,
  });
  const seen: string[] = [];
  const parse = createSseParser((e) => seen.push(e.event));
  const reader = new Response(stream).body!.pipeThrough(new TextDecoderStream()).getReader();
  const read = async (n: number) => {
    while (seen.length < n) parse((await reader.read()).value ?? "");
  };
  await clock.run(read(1));
  await clock.run(read(3));
  version = 1; // tokens moved: the page changed
  await clock.run(read(5));
  assert.deepEqual(seen, ["snapshot", "heartbeat", "heartbeat", "snapshot", "heartbeat"]);
  tab.abort();
  await reader.cancel();
  assert.equal(ended, 1, "the feed is counted out once");
});
