import assert from "node:assert/strict";
import { scopeFromJson } from "./abort_scope.ts";
import { SeenSignatures } from "./peer_scope.ts";
import {
  PEER_SIGNATURE_HEADER,
  PEER_SIGNATURE_WINDOW_MS,
  PEER_TIMESTAMP_HEADER,
  signPeerCall,
  verifyPeerCall,
} from "./peer_signature.ts";

const call = { method: "POST", path: "/request/r-1/abort", body: '{"scope":{"admin":true}}' };
const NOW = 1_800_000_000_000;

Deno.test("peer signature: binds method, path, body and time to the secret", async () => {
  const headers = new Headers(await signPeerCall(call, { secret: "s3cret", now: NOW }));
  assert.match(headers.get(PEER_SIGNATURE_HEADER)!, /^[0-9a-f]{64}$/);
  const verify = (c: typeof call, opts: { secret?: string; now?: number } = {}) =>
    verifyPeerCall({ ...c, headers }, { secret: opts.secret ?? "s3cret", now: opts.now ?? NOW });
  assert.equal(await verify(call), true);
  assert.equal(await verify(call, { now: NOW + PEER_SIGNATURE_WINDOW_MS }), true, "edge of window");
  assert.equal(await verify(call, { now: NOW + PEER_SIGNATURE_WINDOW_MS + 1 }), false, "stale");
  assert.equal(await verify(call, { now: NOW - PEER_SIGNATURE_WINDOW_MS - 1 }), false, "future");
  assert.equal(await verify(call, { secret: "other" }), false, "another secret");
  assert.equal(await verify({ ...call, method: "GET" }), false, "another method");
  assert.equal(await verify({ ...call, path: "/request/r-2/abort" }), false, "another path");
  assert.equal(await verify({ ...call, body: '{"scope":{"admin":false}}' }), false, "another body");
  for (const bad of ["", "zz", "ab".repeat(31), "AB".repeat(32)]) {
    headers.set(PEER_SIGNATURE_HEADER, bad);
    assert.equal(await verify(call), false, `signature ${JSON.stringify(bad)}`);
  }
  const fresh = new Headers(await signPeerCall(call, { secret: "s3cret", now: NOW }));
  fresh.set(PEER_TIMESTAMP_HEADER, "soon");
  assert.equal(
    await verifyPeerCall({ ...call, headers: fresh }, { secret: "s3cret", now: NOW }),
    false,
  );
});

Deno.test("peer signature: each signature is honoured once within its window", () => {
  const seen = new SeenSignatures();
  assert.equal(seen.fresh("a", NOW), true);
  assert.equal(seen.fresh("a", NOW + 1), false, "a replay");
  assert.equal(seen.fresh("b", NOW + 1), true);
  // Long after the window: forgotten, and a stale timestamp refuses it anyway.
  assert.equal(seen.fresh("a", NOW + 3 * PEER_SIGNATURE_WINDOW_MS), true);
});

Deno.test("abort scope: only the admin or one named key", () => {
  assert.deepEqual(scopeFromJson({ admin: true }), { admin: true });
  assert.deepEqual(scopeFromJson({ admin: false, keyId: "a" }), { admin: false, keyId: "a" });
  for (
    const bad of [null, "admin", { admin: "true" }, { admin: false }, { admin: false, keyId: "" }, {
      keyId: "a",
    }, { admin: false, keyId: 7 }]
  ) {
    assert.equal(scopeFromJson(bad), null, JSON.stringify(bad));
  }
});
