import assert from "node:assert/strict";
import { type Db, openDatabase } from "../../db/client.ts";
import { migrate } from "../../db/migrate.ts";
import { VirtualClock } from "../../tests/virtual_clock.ts";
import type { AbortConfig } from "../config/schema.ts";
import { CLIENT_CODECS } from "../formats/formats.ts";
import type { IrRequest } from "../formats/ir.ts";
import type { Logger } from "../runtime/logger.ts";
import { Metrics } from "../runtime/metrics.ts";
import { Fences } from "./fences.ts";
import { LiveRequest } from "./live_request.ts";

const quiet: Logger = { event() {} };

async function database(): Promise<Db> {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-fences-" });
  const db = await openDatabase(`file:${dir}/pulsegate.db`);
  await migrate(db);
  return db;
}

function fencesOn(
  db: Db,
  opts: {
    clock: VirtualClock;
    instanceId?: string;
    abort?: Partial<AbortConfig>;
    metrics?: Metrics;
    bounds?: { perKey?: number; total?: number };
  },
): Fences {
  const abort = { session_fence_secs: 600, turn_fence_secs: 120, ...opts.abort };
  return new Fences({
    db,
    clock: opts.clock,
    log: quiet,
    instanceId: opts.instanceId ?? "i1",
    settings: () => abort,
    metrics: opts.metrics,
    bounds: opts.bounds,
  });
}

const chat = (body: Record<string, unknown>): IrRequest =>
  CLIENT_CODECS.chat.parseRequest({ model: "smart", ...body }, {});

const TURN = [{ role: "user", content: "hello" }, { role: "assistant", content: "hi" }, {
  role: "user",
  content: "write the file",
}];

/** A running request of `keyId` in `sessionId`, its body read. */
function running(clock: VirtualClock, opts: { keyId: string; sessionId: string | null }) {
  const live = new LiveRequest({
    id: "r1",
    instanceId: "i1",
    clientFormat: "openai-chat",
    route: "smart",
    stream: true,
    keyId: opts.keyId,
    sessionId: opts.sessionId,
  }, { clock, sink: { writeRequest() {}, writeAttempt() {} }, metrics: new Metrics() });
  live.parsed(chat({ stream: true, messages: TURN }), { sessionId: opts.sessionId });
  return live;
}

Deno.test("fences: a session fence refuses until exactly session_fence_secs, then passes", async () => {
  const db = await database();
  try {
    const clock = new VirtualClock();
    const metrics = new Metrics();
    const fences = fencesOn(db, { clock, metrics });
    const fence = fences.fenceSession("s1", { admin: true })!;
    assert.equal(fence.expiresAt - clock.now(), 600_000);
    const ir = chat({ messages: TURN });
    const refused = fences.refusal({ keyId: "any", sessionId: "s1", ir });
    assert.equal(refused?.code, "gw.session.fenced");
    assert.equal(refused?.status, 499);
    assert.match(refused!.message, /operator stopped session 's1' until 2023-11-14T22:23:20\.000Z/);
    assert.match(refused!.message, new RegExp(`fence ${fence.id}`));
    assert.equal(metrics.fenceRefusals.get({ kind: "session" }), 1);
    assert.match(metrics.render(), /pulsegate_fences_active\{kind="session"\} 1/);
    await clock.run(clock.sleep(599_999));
    assert.ok(fences.refusal({ keyId: "any", sessionId: "s1", ir }), "599.999 s: still fenced");
    await clock.run(clock.sleep(1));
    assert.equal(fences.refusal({ keyId: "any", sessionId: "s1", ir }), null, "600 s: over");
    assert.match(metrics.render(), /pulsegate_fences_active\{kind="session"\} 0/);
  } finally {
    db.close();
  }
});

Deno.test("fences: a turn fence refuses the same turn re-sent for turn_fence_secs; a new turn passes", async () => {
  const db = await database();
  try {
    const clock = new VirtualClock();
    const fences = fencesOn(db, { clock });
    const fence = fences.fenceTurn(running(clock, { keyId: "a", sessionId: "s1" }))!;
    assert.equal(fence.kind, "turn");
    assert.equal(fence.requestId, "r1");
    assert.equal(fence.expiresAt - clock.now(), 120_000);
    const retry = chat({ stream: false, max_tokens: 99, temperature: 0, messages: TURN });
    const refused = fences.refusal({ keyId: "a", sessionId: "s1", ir: retry });
    assert.equal(refused?.code, "gw.turn.fenced");
    const next = chat({
      messages: [...TURN, { role: "assistant", content: "ok" }, {
        role: "user",
        content: "stop",
      }],
    });
    assert.equal(fences.refusal({ keyId: "a", sessionId: "s1", ir: next }), null);
    assert.equal(fences.refusal({ keyId: "b", sessionId: "s1", ir: retry }), null);
    await clock.run(clock.sleep(119_999));
    assert.ok(fences.refusal({ keyId: "a", sessionId: "s1", ir: retry }));
    await clock.run(clock.sleep(1));
    assert.equal(fences.refusal({ keyId: "a", sessionId: "s1", ir: retry }), null);
  } finally {
    db.close();
  }
});

Deno.test("fences: a request digests its conversation only while its key has a turn fence", async () => {
  const db = await database();
  try {
    const clock = new VirtualClock();
    const fences = fencesOn(db, { clock });
    let read = 0;
    const counted = (ir: IrRequest): IrRequest => ({
      ...ir,
      get messages() {
        read++;
        return ir.messages;
      },
    });
    const ir = counted(chat({ messages: TURN }));
    assert.equal(fences.refusal({ keyId: "a", sessionId: "s1", ir }), null);
    assert.equal(read, 0, "no fence at all: nothing digested");
    fences.fenceTurn(running(clock, { keyId: "b", sessionId: "s1" }));
    fences.fenceSession("s9", { admin: false, keyId: "a" });
    assert.equal(fences.refusal({ keyId: "a", sessionId: "s1", ir }), null);
    assert.equal(read, 0, "only another key's turn fence: nothing digested");
    fences.fenceTurn(running(clock, { keyId: "a", sessionId: "s2" }));
    assert.equal(fences.refusal({ keyId: "a", sessionId: "s1", ir }), null);
    assert.ok(read > 0, "its own key's turn fence: digested");
  } finally {
    db.close();
  }
});

Deno.test("fences: 0 seconds turns each kind off", async () => {
  const db = await database();
  try {
    const clock = new VirtualClock();
    const fences = fencesOn(db, { clock, abort: { session_fence_secs: 0, turn_fence_secs: 0 } });
    assert.equal(fences.fenceSession("s1", { admin: true }), null);
    assert.equal(fences.fenceTurn(running(clock, { keyId: "a", sessionId: "s1" })), null);
    assert.equal(fences.list().length, 0);
  } finally {
    db.close();
  }
});

Deno.test("fences: stored, they reach another instance at its reload, a restart, and a lift reaches both", async () => {
  const db = await database();
  try {
    const clock = new VirtualClock();
    const a = fencesOn(db, { clock, instanceId: "a" });
    const b = fencesOn(db, { clock, instanceId: "b" });
    await b.reload();
    const ir = chat({ messages: TURN });
    const fence = a.fenceSession("s1", { admin: false, keyId: "k" })!;
    assert.equal(await a.save(fence), true);
    assert.equal(b.refusal({ keyId: "k", sessionId: "s1", ir }), null, "not read yet");
    await b.reload();
    assert.equal(b.refusal({ keyId: "k", sessionId: "s1", ir })?.code, "gw.session.fenced");
    assert.equal(b.list()[0]?.instanceId, "a");
    const restarted = fencesOn(db, { clock, instanceId: "a2" });
    await restarted.reload();
    assert.equal(restarted.refusal({ keyId: "k", sessionId: "s1", ir })?.code, "gw.session.fenced");
    assert.equal(await b.lift(fence.id), true);
    assert.equal(b.refusal({ keyId: "k", sessionId: "s1", ir }), null, "lifted here at once");
    assert.ok(a.refusal({ keyId: "k", sessionId: "s1", ir }), "elsewhere at the next reload");
    await a.reload();
    assert.equal(a.refusal({ keyId: "k", sessionId: "s1", ir }), null);
    assert.equal(await a.lift(fence.id), false, "a lifted fence is lifted once");
    await clock.run(clock.sleep(600_000));
    const late = fencesOn(db, { clock, instanceId: "a3" });
    await late.reload();
    assert.equal(late.list().length, 0);
  } finally {
    db.close();
  }
});

Deno.test("fences: the store keeps at most per-key fences per key, lifting the ones expiring first", async () => {
  const db = await database();
  try {
    const clock = new VirtualClock();
    const bounds = { perKey: 2, total: 3 };
    const a = fencesOn(db, { clock, bounds });
    const b = fencesOn(db, { clock, bounds, instanceId: "b" });
    const made = [];
    for (const session of ["s1", "s2", "s3"]) {
      made.push(a.fenceSession(session, { admin: false, keyId: "k" })!);
      await a.save(made.at(-1)!);
      await clock.run(clock.sleep(1_000));
    }
    assert.deepEqual(a.list().map((f) => f.sessionId), ["s3", "s2"], "held here: the latest two");
    await b.reload();
    assert.deepEqual(b.list().map((f) => f.sessionId), ["s3", "s2"], "stored: the same two");
    for (const session of ["t1", "t2"]) {
      const f = a.fenceSession(session, { admin: true })!;
      await a.save(f);
      await clock.run(clock.sleep(1_000));
    }
    await b.reload();
    assert.deepEqual(b.list().map((f) => f.sessionId), ["t2", "t1", "s3"], "three in all");
  } finally {
    db.close();
  }
});

Deno.test("fences: a second abort of the same session renews its fence, stored too", async () => {
  const db = await database();
  try {
    const clock = new VirtualClock();
    const a = fencesOn(db, { clock });
    const first = a.fenceSession("s1", { admin: true })!;
    await a.save(first);
    await clock.run(clock.sleep(60_000));
    const second = a.fenceSession("s1", { admin: true })!;
    await a.save(second);
    assert.deepEqual(a.list().map((f) => f.id), [second.id]);
    const b = fencesOn(db, { clock, instanceId: "b" });
    await b.reload();
    assert.deepEqual(b.list().map((f) => f.id), [second.id]);
    assert.equal(await b.lift(second.id), true);
    await a.reload();
    assert.equal(a.list().length, 0, "one lift undoes the session's fence");
  } finally {
    db.close();
  }
});
