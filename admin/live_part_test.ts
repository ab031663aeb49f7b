import assert from "node:assert/strict";
import { VirtualClock } from "../tests/virtual_clock.ts";
import { LiveRequest } from "../gateway/live/live_request.ts";
import { Metrics } from "../gateway/runtime/metrics.ts";
import type { LivePart } from "./api_types.ts";
import { livePart } from "./live_part.ts";
import { mergeParts } from "./live_merge.ts";
import { LIVE_PAGE_MAX, type LiveQuery, parseCursor, parseLiveQuery } from "./live_query.ts";
import { peerAnswer } from "./live_peer_answer.ts";

const sink = { writeRequest() {}, writeAttempt() {} };

/** `n` running requests, one started per virtual millisecond, `r0` first. */
/**
 * `n` running requests, one started per virtual millisecond, `r0` first. Every fourth waits for a
 * slot; the others sent their first content as they started.
 */
async function running(
  clock: VirtualClock,
  n: number,
  opts: { prefix?: string; sessionId?: string; keyId?: string } = {},
): Promise<LiveRequest[]> {
  const list: LiveRequest[] = [];
  for (let i = 0; i < n; i++) {
    const live = new LiveRequest({
      id: `${opts.prefix ?? "r"}${i}`,
      instanceId: "a1",
      clientFormat: "openai-chat",
      route: i % 2 === 0 ? "smart" : "fast",
      stream: true,
      keyId: opts.keyId ?? (i % 3 === 0 ? "team" : "solo"),
      sessionId: opts.sessionId ?? `chat-${i % 5}`,
    }, { clock, sink, metrics: new Metrics() });
    if (i % 4 === 0) live.waitingForSlot();
    else live.contentSent();
    list.push(live);
    await clock.run(clock.sleep(1));
  }
  return list;
}

function query(params: Record<string, string> = {}): LiveQuery {
  const parsed = parseLiveQuery(params);
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.query;
}

const ids = (part: { rows: { id: string }[] }) => part.rows.map((r) => r.id);

Deno.test("live page: filters, search and order are applied before a page is cut", async () => {
  const clock = new VirtualClock();
  const list = await running(clock, 12);
  await clock.run(clock.sleep(10));
  const part = (params: Record<string, string>) =>
    livePart(list, { query: query(params), now: clock.now(), instance: "a1" });
  assert.deepEqual(ids(part({ route: "fast", limit: "3" })), ["r1", "r3", "r5"]);
  assert.deepEqual(ids(part({ sort: "newest", limit: "2" })), ["r11", "r10"]);
  assert.deepEqual(ids(part({ q: "r1" })), ["r1", "r10", "r11"], "the id contains it");
  assert.deepEqual(
    ids(part({ q: "team", state: "waiting_for_slot" })),
    ["r0"],
    "a key id, in a state",
  );
  assert.deepEqual(ids(part({ session: "chat-4" })), ["r4", "r9"]);
  assert.deepEqual(ids(part({ key: "solo", route: "smart" })), ["r2", "r4", "r8", "r10"]);
  assert.deepEqual(ids(part({ instance: "b2" })), [], "another instance's requests only");
  // Content moved on r2, then on r5: longest idle first puts them last, r5 at the end.
  list[2]!.frame();
  await clock.run(clock.sleep(5));
  list[5]!.frame();
  assert.deepEqual(ids(part({ sort: "idle" })).slice(-2), ["r2", "r5"]);
  assert.deepEqual(ids(part({ sort: "idle", limit: "3" })), ["r0", "r1", "r3"]);
  const all = part({ limit: "5" });
  assert.equal(all.running, 12);
  assert.equal(all.matching, 12);
  assert.deepEqual(all.states, { waiting_for_slot: 3, streaming: 9 });
  assert.equal(all.rows.length, 5, "only the page is built");
});

Deno.test("live page: a cursor continues after the last row; two instances' shares merge", async () => {
  const clock = new VirtualClock();
  const a = await running(clock, 7, { prefix: "a" });
  const b = await running(clock, 5, { prefix: "b" });
  await clock.run(clock.sleep(10));
  const now = clock.now();
  const page = (params: Record<string, string>) => {
    const q = query(params);
    const parts = [
      livePart(a, { query: q, now, instance: "a1" }),
      livePart(b, { query: q, now, instance: "b2" }),
    ];
    return mergeParts(parts, {
      query: q,
      at: now,
      instances: ["a1", "b2"],
      silent: [],
      choices: { routes: [], upstreams: [] },
    });
  };
  const first = page({ limit: "5" });
  assert.deepEqual(first.requests.map((r) => [r.instance, r.id]).slice(0, 2), [
    ["a1", "a0"],
    ["a1", "a1"],
  ]);
  assert.deepEqual(first.totals, { running: 12, matching: 12, states: first.totals.states });
  assert.equal(first.page.offset, 0);
  assert.ok(first.page.next);
  const second = page({ limit: "5", after: first.page.next });
  assert.equal(second.page.offset, 5);
  assert.deepEqual(second.requests.map((r) => r.id), ["a5", "a6", "b0", "b1", "b2"]);
  const third = page({ limit: "5", after: second.page.next! });
  assert.equal(third.page.offset, 10);
  assert.deepEqual(third.requests.map((r) => r.id), ["b3", "b4"]);
  assert.equal(third.page.next, null, "the last page");
  const newest = page({ sort: "newest", limit: "3", q: "b" });
  assert.deepEqual(newest.requests.map((r) => r.id), ["b4", "b3", "b2"]);
  assert.equal(newest.totals.matching, 5);
});

Deno.test("live query: page size, search length and cursors are bounded", () => {
  assert.equal(query().limit, LIVE_PAGE_MAX);
  const bounds: Record<string, string>[] = [
    { limit: "101" },
    { limit: "0" },
    { q: "x".repeat(201) },
    { state: "sleeping" },
    { sort: "random" },
    { after: "not-a-cursor" },
    { route: "r".repeat(257) },
  ];
  for (const bad of bounds) {
    assert.equal(parseLiveQuery(bad).ok, false, JSON.stringify(bad).slice(0, 60));
  }
  assert.deepEqual(parseCursor("-17.ab12.id.with.dots"), {
    rank: -17,
    instance: "ab12",
    id: "id.with.dots",
  });
});

Deno.test("peer answers: anything but a bounded, well-formed share of the page is refused", async () => {
  const clock = new VirtualClock();
  const b = await running(clock, 3, { prefix: "b" });
  await clock.run(clock.sleep(10));
  const q = query({ limit: "2" });
  const good = livePart(b, { query: q, now: clock.now(), instance: "b2" });
  const check = (part: unknown, opts: { query?: LiveQuery } = {}) =>
    peerAnswer(typeof part === "string" ? part : JSON.stringify(part), {
      query: opts.query ?? q,
      instance: "b2",
    });
  const ok = check(good);
  assert.ok(ok.ok);
  const tampered: LivePart = { ...good, rows: good.rows.map((r) => ({ ...r, instance: "zz" })) };
  const fixed = check(tampered);
  assert.ok(fixed.ok && fixed.part.rows.every((r) => r.instance === "b2"), "named as asked");
  const row = good.rows[0]!;
  const refused: [string, unknown][] = [
    ["not JSON", "{"],
    ["too deep", "[".repeat(50) + "]".repeat(50)],
    ["another instance", { ...good, instance: "c3" }],
    ["more rows than asked", { ...good, rows: [row, row, row] }],
    ["a negative count", { ...good, running: -1 }],
    ["matching over running", { ...good, matching: good.running + 1 }],
    ["a bad state", { ...good, rows: [{ ...row, state: "sleeping" }] }],
    ["an endless id", { ...good, rows: [{ ...row, id: "x".repeat(600) }] }],
    ["a missing field", { ...good, rows: [{ ...row, startedAt: undefined }] }],
    ["a string for a number", { ...good, rows: [{ ...row, hop: "1" }] }],
  ];
  for (const [why, part] of refused) assert.equal(check(part).ok, false, why);
  // A full page of the longest rows a peer makes passes: the bounds are for what no peer sends.
  const many = await running(clock, LIVE_PAGE_MAX + 5, {
    prefix: "x".repeat(60),
    sessionId: "s".repeat(100),
    keyId: "k".repeat(60),
  });
  const full = livePart(many, { query: query(), now: clock.now(), instance: "b2" });
  assert.equal(full.rows.length, LIVE_PAGE_MAX);
  assert.ok(peerAnswer(JSON.stringify(full), { query: query(), instance: "b2" }).ok);
  const after = parseLiveQuery({ limit: "2", after: `${row.startedAt}.b2.${row.id}` });
  assert.ok(after.ok);
  assert.equal(check(good, { query: after.query }).ok, false, "rows at or before the cursor");
});
