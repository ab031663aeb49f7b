import assert from "node:assert/strict";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { chatStreamHeld, chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { eventually, postJson, type TestGateway, withGateway } from "./harness.ts";
import { RawBodyClient } from "./raw_body.ts";

/**
 * docs/security.md "Request bodies and per-key concurrency": a key is admitted (rpm, tpm,
 * budget, max_in_flight) before its body is read, and a key's places in progress are held
 * from admission until the request's row closes, streams included.
 */

const ENV = { PULSEGATE_KEY_LIMITED: "sk-limited", PULSEGATE_KEY_CAPPED: "sk-capped" };
const ASK = { model: "smart", messages: [{ role: "user", content: "hi" }] };
const PATH = "/v1/chat/completions";

function config(url: string): ConfigInput {
  return {
    // Streams held open by the test: a long idle window (3000 s: 30 s at the test scale).
    failover: { idle_timeout_secs: 3000 },
    upstreams: [{ id: "up1", kind: "openai-chat", base_url: url }],
    routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "m" }] }],
    keys: [
      { id: "limited", key_env: "PULSEGATE_KEY_LIMITED", rpm: 1 },
      { id: "capped", key_env: "PULSEGATE_KEY_CAPPED", max_in_flight: 2 },
    ],
  };
}

const keyCount = (gw: TestGateway, key: string) => gw.metrics.keyInFlight.get({ key });

Deno.test("a key over its rpm is refused before its body is read, even one never sent", async () => {
  await withGateway(async (gw, [up]) => {
    up!.setHandler(() => chatWhole({ text: ["ok"] }));
    const first = await postJson(`${gw.url}${PATH}`, ASK, { authorization: "Bearer sk-limited" });
    assert.equal(first.status, 200);
    await first.body?.cancel();
    // Declares a body and never sends it: only an answer given before reading can come. With
    // `Expect: 100-continue` too: Deno sends `100 Continue` itself as the headers arrive, so the
    // refusal cannot come instead of it, but it comes without waiting for the body.
    for (const expect of [false, true]) {
      const id = `over-rpm-${expect ? "expect" : "plain"}`;
      const client = await RawBodyClient.open(gw.url, {
        path: PATH,
        headers: {
          authorization: "Bearer sk-limited",
          "content-type": "application/json",
          "content-length": "5000",
          "x-request-id": id,
          ...(expect ? { expect: "100-continue" } : {}),
        },
      });
      try {
        const answer = await client.answer({ ms: 5_000 });
        assert.equal(answer.status, 429, answer.text);
        assert.equal(answer.headers.get("x-pulsegate-error-code"), "gw.key.rate_limited");
        assert.ok(Number(answer.headers.get("retry-after")) >= 1);
        assert.equal(JSON.parse(answer.text).error.code, "gw.key.rate_limited");
        const { request } = await gw.row(id);
        assert.equal(request.status, 429);
        assert.equal(request.errorCode, "gw.key.rate_limited");
        assert.equal(request.keyId, "limited");
      } finally {
        client.close();
      }
    }
    assert.equal(up!.calls.length, 1);
    await eventually(() => gw.metrics.inflight === 0 && keyCount(gw, "limited") === 0);
  }, { config: ([url]) => config(url!), env: ENV });
});

Deno.test("max_in_flight: a third request is refused 429 and recorded; places free as streams end or are cancelled", async () => {
  await withGateway(async (gw, [up]) => {
    const release = Promise.withResolvers<void>();
    up!.setHandler(() => chatStreamHeld({ text: ["a", "b"] }, release.promise));
    const auth = { authorization: "Bearer sk-capped" };
    const stream = { ...ASK, stream: true };
    const kept = await postJson(`${gw.url}${PATH}`, stream, auth);
    const cancelled = await postJson(`${gw.url}${PATH}`, stream, auth);
    assert.equal(kept.status, 200);
    assert.equal(cancelled.status, 200);
    assert.equal(keyCount(gw, "capped"), 2);

    const third = await postJson(`${gw.url}${PATH}`, stream, auth);
    assert.equal(third.status, 429);
    assert.equal(third.headers.get("x-pulsegate-error-code"), "gw.key.max_in_flight");
    assert.equal(third.headers.get("retry-after"), "1");
    assert.equal((await third.json()).error.code, "gw.key.max_in_flight");
    const refused = await gw.row(third.headers.get("x-request-id")!);
    assert.equal(refused.request.status, 429);
    assert.equal(refused.request.errorCode, "gw.key.max_in_flight");
    assert.equal(refused.request.keyId, "capped");
    assert.equal(up!.calls.length, 2, "the refused request reached no upstream");

    // A client that leaves gives its place back when its row closes.
    await cancelled.body?.cancel();
    const gone = await gw.row(cancelled.headers.get("x-request-id")!);
    assert.equal(gone.request.errorCode, "gw.client.disconnected");
    await eventually(() => keyCount(gw, "capped") === 1, { what: "the cancelled place freed" });

    // A stream that ends gives its place back too.
    release.resolve();
    assert.match(await kept.text(), /\[DONE\]/);
    await gw.row(kept.headers.get("x-request-id")!);
    await eventually(() => keyCount(gw, "capped") === 0, { what: "every place freed" });
    assert.equal(gw.metrics.inflight, 0);
    assert.equal(gw.slots.inFlight("up1"), 0);

    up!.setHandler(() => chatWhole({ text: ["again"] }));
    const after = await postJson(`${gw.url}${PATH}`, ASK, auth);
    assert.equal(after.status, 200);
    await after.body?.cancel();
    assert.match(
      await (await fetch(`${gw.url}/metrics`)).text(),
      /pulsegate_key_in_flight_requests\{key="capped"\} 0/,
    );
  }, { config: ([url]) => config(url!), env: ENV });
});
