/**
 * Every finished hop lets its upstream go (gateway/forward/hop.ts, `close`): a body read to its
 * end is over, and one the hop stopped reading (an error body past its cap, a stream cut by
 * an error event) is cancelled, so no upstream connection outlives its hop. A hop whose answers
 * were all read to their end skips its abort at close (docs/benchmarks.md "Held stream and
 * per-read objects"); these say the others still hang up. A whole gateway in virtual time.
 */
import assert from "node:assert/strict";
import { startVirtualGateway } from "../virtual_gateway.ts";
import { chatStream, chatWhole } from "../fake_upstreams/openai_chat_script.ts";
import { UPSTREAM_CAPS } from "../../gateway/formats/upstream_caps.ts";

const chat = { model: "smart", messages: [{ role: "user", content: "hi" }] };

Deno.test("hop release: a whole answer and a stream read to their end are ended, not cancelled", async () => {
  await using v = await startVirtualGateway({ upstreams: 1 });
  const up = v.ups[0]!;
  up.enqueue(chatWhole({ text: ["hello"] }), chatStream({ text: ["a", "b"] }));
  const whole = await v.send("/v1/chat/completions", chat);
  assert.equal(whole.status, 200);
  const stream = await v.send("/v1/chat/completions", { ...chat, stream: true });
  assert.match(stream.text, /data: \[DONE\]/);
  assert.deepEqual(await Promise.all(up.calls.map((c) => c.closed)), ["ended", "ended"]);
  assert.equal(up.openConnections, 0);
});

Deno.test("hop release: an error body past its cap that never ends is hung up on, and the next candidate answers", async () => {
  await using v = await startVirtualGateway({ upstreams: 2 });
  const [a, b] = [v.ups[0]!, v.ups[1]!];
  const past = "x".repeat(UPSTREAM_CAPS.errorBodyBytes + 1);
  a.enqueue({ status: 500, body: [{ send: past }, { hang: true }] });
  b.enqueue(chatWhole({ text: ["from b"] }));
  const got = await v.send("/v1/chat/completions", chat);
  assert.equal(got.status, 200);
  assert.match(got.text, /from b/);
  assert.equal(await a.calls[0]!.closed, "cancelled");
  assert.equal(a.openConnections, 0);
});

Deno.test("hop release: a stream cut by the upstream's error event, its body still open, is hung up on", async () => {
  await using v = await startVirtualGateway({ upstreams: 1 });
  const up = v.ups[0]!;
  const delta = (text: string) =>
    `data: {"choices":[{"index":0,"delta":{"content":"${text}"},"finish_reason":null}]}\n\n`;
  up.enqueue({
    headers: { "content-type": "text/event-stream" },
    body: [
      { send: delta("partial") },
      { send: 'data: {"error":{"message":"overloaded","type":"server_error"}}\n\n' },
      { hang: true },
    ],
  });
  const got = await v.send("/v1/chat/completions", { ...chat, stream: true });
  assert.match(got.text, /partial/);
  assert.match(got.text, /overloaded/);
  assert.equal(await up.calls[0]!.closed, "cancelled");
  assert.equal(up.openConnections, 0);
});
