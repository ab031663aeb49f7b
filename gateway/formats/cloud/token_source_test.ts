/**
 * The access token of a service account over its life (gateway/formats/cloud/token_source.ts),
 * against the local OAuth endpoint that verifies each signed assertion, on a clock the test
 * moves: kept while fresh, renewed in the background before it expires (the held token still
 * serving), waited for once it has run out, one fetch in flight whoever asks, a failed fetch
 * backed off (not asked again at every call) but never fatal, and the issuer's `expires_in` taken
 * between a minute and an hour.
 */
import assert from "node:assert/strict";
import { fetchAccessToken, readServiceAccount } from "./service_account.ts";
import { TokenSource } from "./token_source.ts";
import { GatewayError } from "../../runtime/gateway_error.ts";
import { eventually } from "../../../tests/harness.ts";
import { type FakeOAuth, startFakeOAuth } from "../../../tests/fake_upstreams/fake_oauth.ts";

const MINUTE = 60_000;

async function sourceOver(oauth: FakeOAuth) {
  const account = await readServiceAccount(await oauth.serviceAccountJson());
  const clock = { now: 1_000_000 };
  // The assertion is signed at the real time (the endpoint checks `iat`); the source's view of
  // the token's life runs on the test's clock, from the lifetime the endpoint answered.
  const source = new TokenSource(async () => {
    const grant = await fetchAccessToken(account, { now: Date.now(), fetch });
    return { token: grant.token, expiresAt: clock.now + (grant.expiresAt - Date.now()) };
  }, { now: () => clock.now });
  return { source, clock };
}

Deno.test("token: fetched once, kept while fresh, renewed in the background before it expires", async () => {
  await using oauth = await startFakeOAuth();
  const { source, clock } = await sourceOver(oauth);
  const first = await source.token();
  assert.equal(first, oauth.calls[0]?.token);
  clock.now += 50 * MINUTE;
  assert.equal(await source.token(), first, "fresh: no fetch");
  assert.equal(oauth.calls.length, 1);
  // Within five minutes of its end: the held token answers at once, a renewal starts.
  clock.now += 5 * MINUTE;
  assert.equal(await source.token(), first);
  let second = first;
  await eventually(async () => (second = await source.token()) !== first, {
    what: "the renewed token in use",
  });
  assert.equal(second, oauth.calls[1]?.token);
  assert.equal(oauth.calls.length, 2);
});

Deno.test("token: callers at once share one fetch; an expired token is waited for, not sent", async () => {
  await using oauth = await startFakeOAuth();
  const { source, clock } = await sourceOver(oauth);
  let release!: () => void;
  oauth.holdUntil(new Promise<void>((r) => (release = r)));
  const waiting = Array.from({ length: 10 }, () => source.token());
  await eventually(() => oauth.calls.length === 1);
  release();
  const tokens = await Promise.all(waiting);
  assert.equal(new Set(tokens).size, 1);
  assert.equal(oauth.calls.length, 1);
  // Past its end (less than 30 s left counts as ended): a new one is fetched before answering.
  oauth.holdUntil(null);
  clock.now += 60 * MINUTE - 20_000;
  const renewed = await source.token();
  assert.notEqual(renewed, tokens[0]);
  assert.equal(oauth.calls.length, 2);
});

Deno.test("token: a failed fetch rejects its waiters and every call for 1 s after, doubling per failure in a row; then the next call tries again", async () => {
  await using oauth = await startFakeOAuth();
  const { source, clock } = await sourceOver(oauth);
  oauth.failWith(503);
  const errors = await Promise.all([source.token(), source.token()].map((p) => p.catch((e) => e)));
  for (const err of errors) {
    assert.ok(err instanceof GatewayError);
    assert.equal(err.code, "gw.upstream.credentials");
    assert.equal(err.source, "upstream", "charged to the upstream that needed it");
  }
  assert.equal(oauth.calls.length, 1);
  // Twenty more requests at once: the failure, at once, and not one more call to the endpoint.
  for (let i = 0; i < 20; i++) {
    await assert.rejects(source.token(), /the token endpoint answered 503/);
  }
  assert.equal(oauth.calls.length, 1);
  clock.now += 1_000;
  await assert.rejects(source.token(), /answered 503/);
  assert.equal(oauth.calls.length, 2, "asked again once the second has passed");
  clock.now += 1_000;
  await assert.rejects(source.token(), /answered 503/);
  assert.equal(oauth.calls.length, 2, "a second failure in a row: 2 s");
  clock.now += 1_000;
  oauth.failWith(null);
  const token = await source.token();
  assert.equal(token, oauth.calls[2]?.token);
  // A background renewal that fails leaves the held token serving, and backs off the same way.
  oauth.failWith(500);
  clock.now += 56 * MINUTE;
  assert.equal(await source.token(), token);
  await eventually(() => oauth.calls.length === 4 && oauth.calls[3]?.refused !== undefined);
  assert.equal(await source.token(), token);
  assert.equal(oauth.calls.length, 4, "no second renewal within 1 s of a failed one");
  // The failed renewal settles on a later turn of the loop than the endpoint's answer, and its
  // second runs from then: step the clock until the next call renews, never before that second.
  let waited = 0;
  await eventually(async () => {
    clock.now += 250;
    waited += 250;
    assert.equal(await source.token(), token);
    return oauth.calls.length === 5;
  });
  assert.ok(waited >= 1_000, `renewed again ${waited} ms after the failed renewal`);
});

Deno.test("token: a lifetime under a minute is kept a minute, one over an hour an hour", async () => {
  await using oauth = await startFakeOAuth();
  // A second's token, taken as it says, was fetched anew for every request.
  oauth.expiresIn = 0.001;
  const short = await sourceOver(oauth);
  const first = await short.source.token();
  for (let i = 0; i < 20; i++) assert.equal(await short.source.token(), first);
  assert.equal(oauth.calls.length, 1);
  short.clock.now += 50_000; // past its minute's last quarter: renewed before it is sent
  assert.notEqual(await short.source.token(), first);
  assert.equal(oauth.calls.length, 2);
  // A token said to last for ever is not sent past the hour a grant is worth.
  oauth.expiresIn = 1e12;
  const long = await sourceOver(oauth);
  const kept = await long.source.token();
  long.clock.now += 60 * MINUTE;
  assert.notEqual(await long.source.token(), kept);
  assert.equal(oauth.calls.length, 4);
});

Deno.test("token: a caller that stops waiting does not stop the fetch for the others", async () => {
  await using oauth = await startFakeOAuth();
  const { source } = await sourceOver(oauth);
  let release!: () => void;
  oauth.holdUntil(new Promise<void>((r) => (release = r)));
  const stop = new AbortController();
  const leaving = source.token({ signal: stop.signal });
  const staying = source.token();
  await eventually(() => oauth.calls.length === 1);
  stop.abort(new Error("client went away"));
  await assert.rejects(leaving, /client went away/);
  release();
  assert.equal(await staying, oauth.calls[0]?.token);
});
