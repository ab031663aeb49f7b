import assert from "node:assert/strict";
import { type Fence, FenceSet } from "./fence_set.ts";

const T0 = 1_700_000_000_000;

let made = 0;
function fence(over: Partial<Fence>): Fence {
  return {
    id: `f${++made}`,
    kind: "session",
    keyId: "a",
    sessionId: "s1",
    fingerprint: null,
    requestId: null,
    instanceId: "i1",
    createdAt: T0,
    expiresAt: T0 + 600_000,
    liftedAt: null,
    ...over,
  };
}

Deno.test("fence set: a fence holds until the millisecond before it expires, not at it", () => {
  const set = new FenceSet();
  const f = fence({ expiresAt: T0 + 600_000 });
  set.put(f, T0);
  assert.equal(set.sessionFence("s1", "a", T0 + 599_999)?.id, f.id);
  assert.equal(set.sessionFence("s1", "a", T0 + 600_000), null);
  assert.equal(set.size, 0, "found over, it is dropped");
  set.put(fence({ expiresAt: T0 }), T0);
  assert.equal(set.size, 0, "one already over is never held");
});

Deno.test("fence set: a session fence refuses its scope only", () => {
  const set = new FenceSet();
  set.put(fence({ keyId: "a", sessionId: "mine" }), T0);
  set.put(fence({ keyId: null, sessionId: "every" }), T0);
  const table: Array<[string, string | null, boolean]> = [
    ["mine", "a", true],
    ["mine", "b", false], // another key's session of the same name is another session
    ["every", "a", true],
    ["every", "b", true],
    ["every", null, true],
    ["other", "a", false],
  ];
  for (const [session, key, fenced] of table) {
    assert.equal(set.sessionFence(session, key, T0) !== null, fenced, `${session} under ${key}`);
  }
});

Deno.test("fence set: a turn fence refuses the same key, session and conversation only", () => {
  const set = new FenceSet();
  const turn = fence({ kind: "turn", keyId: "a", sessionId: "s1", fingerprint: "fp" });
  set.put(turn, T0);
  set.put(fence({ kind: "turn", keyId: "a", sessionId: null, fingerprint: "fq" }), T0);
  const table: Array<[string | null, string | null, string, boolean]> = [
    ["a", "s1", "fp", true],
    ["a", "s1", "other", false], // a new turn of the session passes
    ["b", "s1", "fp", false],
    ["a", "s2", "fp", false],
    ["a", null, "fp", false],
    ["a", null, "fq", true], // no session: by key and conversation
    ["b", null, "fq", false],
  ];
  for (const [keyId, sessionId, fingerprint, fenced] of table) {
    const found = set.turnFence({ keyId, sessionId, fingerprint }, T0);
    assert.equal(found !== null, fenced, `${keyId}/${sessionId}/${fingerprint}`);
  }
  assert.equal(set.sessionFence("s1", "a", T0), null, "a turn fence is no session fence");
  assert.equal(set.mayHaveTurnFence("a"), true);
  assert.equal(set.mayHaveTurnFence("b"), false, "another key's requests are never digested");
  set.put(fence({ kind: "turn", keyId: null, sessionId: null, fingerprint: "fo" }), T0);
  assert.equal(set.mayHaveTurnFence("b"), true, "a fence of every key (an open proxy) applies");
});

Deno.test("fence set: past the per-key bound the fence expiring first goes, other keys keep theirs", () => {
  const set = new FenceSet({ perKey: 3, total: 100 });
  const own = [5, 1, 4, 3].map((m) =>
    fence({ keyId: "a", sessionId: `s${m}`, expiresAt: T0 + m * 60_000 })
  );
  const other = fence({ keyId: "b", expiresAt: T0 + 1 });
  set.put(other, T0);
  const evicted = own.map((f) => set.put(f, T0));
  assert.deepEqual(evicted.map((e) => e.map((f) => f.id)), [[], [], [], [own[1]!.id]]);
  assert.deepEqual(
    set.active(T0).filter((f) => f.keyId === "a").map((f) => f.expiresAt - T0),
    [5, 4, 3].map((m) => m * 60_000),
  );
  assert.ok(set.get(other.id), "key b's fence is not a's to evict");
  for (let i = 0; i < 5; i++) set.put(fence({ keyId: null, sessionId: `e${i}` }), T0);
  assert.equal(set.size, 9, "the operator's every-key fences count only in the total");
});

Deno.test("fence set: past the total the fence expiring first of all goes", () => {
  const set = new FenceSet({ perKey: 100, total: 3 });
  const fences = [3, 1, 2, 4].map((m, i) => fence({ keyId: `k${i}`, expiresAt: T0 + m * 1000 }));
  const evicted = fences.flatMap((f) => set.put(f, T0));
  assert.deepEqual(evicted.map((f) => f.id), [fences[1]!.id]);
  assert.equal(set.size, 3);
});

Deno.test("fence set: a lifted fence refuses nothing; a lifted copy drops the held one", () => {
  const set = new FenceSet();
  const f = fence({});
  set.put(f, T0);
  assert.equal(set.lift(f.id), true);
  assert.equal(set.sessionFence("s1", "a", T0), null);
  assert.equal(set.lift(f.id), false);
  set.put(f, T0);
  set.put({ ...f, liftedAt: T0 }, T0);
  assert.equal(set.sessionFence("s1", "a", T0), null, "a reload that reads the lift drops it");
  assert.deepEqual(set.counts(T0), { session: 0, turn: 0 });
});

Deno.test("fence set: a second fence of the same scope renews the first; another scope stays", () => {
  const set = new FenceSet();
  const first = fence({ expiresAt: T0 + 1000 });
  const other = fence({ keyId: "b" });
  set.put(first, T0);
  set.put(other, T0);
  const second = fence({ createdAt: T0 + 500, expiresAt: T0 + 2000 });
  set.put(second, T0 + 500);
  assert.equal(set.get(first.id), undefined);
  assert.equal(set.sessionFence("s1", "a", T0 + 1500)?.id, second.id);
  assert.ok(set.get(other.id));
  set.put(first, T0 + 500);
  assert.ok(set.get(second.id), "an older copy read late never replaces the newer");
});
