/**
 * The opening hold at its real default (docs/design.md "Pulse"): a stream held until its first
 * content answers its headers at 15 s with a `: keep-alive`, and another every 15 s, which never
 * restart the idle timer (300 s); a whole answer is never answered early. In virtual time.
 */
import assert from "node:assert/strict";
import { startVirtualGateway } from "../virtual_gateway.ts";
import { chatError, chatStream, silentAfterHeaders } from "../fake_upstreams/openai_chat_script.ts";

const HOLD_MS = 15_000;
const IDLE_MS = 300_000;
const good = { text: ["good ", "answer"], usage: { input: 5, output: 2 } };
const messages = [{ role: "user", content: "hi" }];
const chat = (stream: boolean) => ({ model: "smart", stream, messages });

Deno.test("the hold answers a silent stream's headers at 15 s exactly, with a keep-alive", async () => {
  await using v = await startVirtualGateway({ upstreams: 2 });
  v.ups[0]!.setHandler(() => silentAfterHeaders);
  v.ups[1]!.setHandler(() => chatStream(good));
  const got = await v.send("/v1/chat/completions", chat(true));
  assert.equal(got.status, 200);
  assert.equal(got.headersAt, HOLD_MS, "no headers before 15 s, and none after");
  assert.deepEqual(got.pieces[0], { at: HOLD_MS, text: ": keep-alive\n\n" });
});

Deno.test("keep-alives every 15 s until content, never restarting the idle timer (300 s)", async () => {
  await using v = await startVirtualGateway({ upstreams: 2 });
  v.ups[0]!.setHandler(() => silentAfterHeaders);
  v.ups[1]!.setHandler(() => chatStream(good));
  const got = await v.send("/v1/chat/completions", chat(true));
  const keepAlives = got.pieces.filter((p) => p.text === ": keep-alive\n\n").map((p) => p.at);
  // 15 s, 30 s, ... 285 s: the 300 s one, if any, shares its instant with the failover.
  const expected = Array.from({ length: 19 }, (_, i) => (i + 1) * HOLD_MS);
  assert.deepEqual(keepAlives.filter((at) => at < IDLE_MS), expected);
  const content = got.pieces.find((p) => p.text.includes("good "));
  assert.equal(content?.at, IDLE_MS, "the silent upstream was given up on at 300 s exactly");
  assert.match(got.text, /\[DONE\]/);
});

Deno.test("whole answers are never answered early: headers at the first candidate's timeout", async () => {
  await using v = await startVirtualGateway({ upstreams: 2 });
  v.ups[0]!.setHandler(() => silentAfterHeaders);
  v.ups[1]!.setHandler(() => ({
    body: [{ send: JSON.stringify({ choices: [{ message: { content: "late" } }] }) }],
  }));
  const got = await v.send("/v1/chat/completions", chat(false));
  assert.equal(got.status, 200);
  assert.equal(got.headersAt, IDLE_MS, "no headers before the first candidate's 300 s");
  assert.equal(JSON.parse(got.text).choices[0].message.content, "late");
});

Deno.test("after early headers, an in-stream error fails over cleanly", async () => {
  await using v = await startVirtualGateway({ upstreams: 2 });
  v.ups[0]!.enqueue({
    headers: { "content-type": "text/event-stream" },
    body: [
      { send: ": ping\n\n" },
      { wait: 20_000 },
      { send: 'data: {"error":{"message":"overloaded mid-way","type":"server_error"}}\n\n' },
    ],
  });
  v.ups[1]!.setHandler(() => chatStream(good));
  const got = await v.send("/v1/chat/completions", chat(true));
  assert.deepEqual(got.pieces[0], { at: HOLD_MS, text: ": keep-alive\n\n" }, "the hold passed");
  assert.doesNotMatch(got.text, /overloaded|: ping/, "nothing of the abandoned upstream");
  assert.equal(got.pieces.find((p) => p.text.includes("good "))?.at, 20_000);
  const { attempts, request } = await v.row(got.headers.get("x-request-id")!);
  assert.deepEqual(attempts.map((x) => x.outcome), ["error", "success"]);
  assert.equal(request.outcome, "success");
});

Deno.test("a last upstream's 400 after early headers is told in the stream", async () => {
  await using v = await startVirtualGateway({ upstreams: 2 });
  v.ups[0]!.setHandler(() => silentAfterHeaders);
  v.ups[1]!.setHandler(() => chatError(400, "messages too long"));
  const got = await v.send("/v1/chat/completions", chat(true));
  assert.equal(got.status, 200);
  assert.equal(got.headersAt, HOLD_MS);
  assert.match(got.text, /: keep-alive/);
  assert.match(got.text, /data: \{"error":\{"message":"messages too long/);
  assert.equal(got.endedAt, IDLE_MS, "told when the first candidate was given up on");
  const { request } = await v.row(got.headers.get("x-request-id")!);
  assert.equal(request.status, 400);
  assert.equal(request.failureSource, "client");
});
