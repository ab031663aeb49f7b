import assert from "node:assert/strict";
import { newRequestId } from "../gateway/live/request_id.ts";
import { chatRoute, withGateway } from "./harness.ts";
import { chatWhole } from "./fake_upstreams/openai_chat_script.ts";

/** docs/design.md "History": ids the gateway makes are UUIDv7, in the order they were made. */
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

Deno.test("a made request id is a UUIDv7 whose first 48 bits are the time", () => {
  const at = Date.UTC(2026, 0, 2, 3, 4, 5, 678);
  const id = newRequestId(at);
  assert.match(id, UUID_V7);
  assert.equal(parseInt(id.slice(0, 8) + id.slice(9, 13), 16), at);
  const ids = new Set(Array.from({ length: 10_000 }, () => newRequestId(at)));
  assert.equal(ids.size, 10_000, "74 random bits tell ids of one millisecond apart");
  // Later ids sort after earlier ones, so rows land at the end of the primary key index.
  const times = [at, at + 1, at + 256, at + 65_536, at + 2 ** 32];
  const made = times.map((t) => newRequestId(t));
  assert.deepEqual([...made].sort(), made);
});

Deno.test("a request without x-request-id is answered and recorded under a UUIDv7", async () => {
  await withGateway(async (gw, [up]) => {
    up!.enqueue(chatWhole({ text: ["hi"] }));
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "smart", messages: [{ role: "user", content: "q" }] }),
    });
    assert.equal(res.status, 200);
    await res.body?.cancel();
    const id = res.headers.get("x-request-id") ?? "";
    assert.match(id, UUID_V7);
    assert.equal((await gw.row(id)).request.status, 200);
  }, { config: (urls) => chatRoute(urls) });
});
