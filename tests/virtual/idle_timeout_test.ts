/**
 * The idle timeout at its real default (docs/liveness.md): 300 s of silence after content ends a
 * stream, not 299; content restarts it, keep-alives never do. A whole gateway in virtual time.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startVirtualGateway } from "../virtual_gateway.ts";
import {
  chatStream,
  chatWhole,
  contentThenSilence,
  keepAlivesOnly,
} from "../fake_upstreams/openai_chat_script.ts";

const IDLE_MS = 300_000;
const chat = { model: "smart", stream: true, messages: [{ role: "user", content: "hi" }] };

Deno.test("content then silence: the stream ends with idle_timeout_mid_stream at 300 s of silence, not before", async () => {
  await using v = await startVirtualGateway();
  v.ups[0]!.enqueue(contentThenSilence("partial answer"));
  const got = await v.send("/v1/chat/completions", chat);
  assert.equal(got.status, 200);
  const content = got.pieces.find((p) => p.text.includes("partial answer"));
  assert.equal(content?.at, 0, "the content went out as it came");
  const last = got.pieces.at(-1)!;
  assert.match(last.text, /idle_timeout_mid_stream/);
  assert.equal(last.at, IDLE_MS, "the error went out at 300 s exactly");
  assert.ok(got.pieces.every((p) => p.at === 0 || p.at === IDLE_MS), "nothing in between");
  assert.equal(await v.ups[0]!.calls[0]!.closed, "cancelled", "the silent upstream was hung up on");
  const { request } = await v.row(got.headers.get("x-request-id")!);
  assert.equal(request.errorCode, "gw.upstream.idle_timeout_mid_stream");
});

Deno.test("a slow but steady stream of 20 minutes, a piece every 299 s, is never cut", async () => {
  await using v = await startVirtualGateway();
  const pieces = Array.from({ length: 5 }, (_, i) => `piece${i} `);
  v.ups[0]!.enqueue(chatStream({ text: pieces }, { gap: IDLE_MS - 1_000 }));
  const got = await v.send("/v1/chat/completions", chat);
  assert.equal(got.status, 200);
  for (const piece of pieces) assert.ok(got.text.includes(piece), piece);
  assert.doesNotMatch(got.text, /idle_timeout/);
  assert.match(got.text, /data: \[DONE\]/);
  assert.ok(got.endedAt >= 4 * (IDLE_MS - 1_000), `ran ${got.endedAt} ms`);
});

Deno.test("keep-alives alone never restart the idle timer: the first token is given up on at 300 s", async () => {
  await using v = await startVirtualGateway({ upstreams: 1 });
  v.ups[0]!.enqueue(keepAlivesOnly(10_000));
  const got = await v.send("/v1/chat/completions", chat);
  const last = got.pieces.at(-1)!;
  assert.match(got.text, /idle_timeout/);
  assert.equal(last.at, IDLE_MS);
});

Deno.test("the official OpenAI SDK through the gateway in virtual time: a whole answer", async () => {
  await using v = await startVirtualGateway();
  v.ups[0]!.enqueue(chatWhole({ text: ["hello"] }));
  const client = new OpenAI({
    baseURL: "http://127.0.0.1/v1",
    apiKey: "unused",
    maxRetries: 0,
    fetch: v.fetch,
  });
  const answer = await v.run(
    client.chat.completions.create({ model: "smart", messages: [{ role: "user", content: "hi" }] }),
  );
  assert.equal(answer.choices[0]?.message.content, "hello");
});
