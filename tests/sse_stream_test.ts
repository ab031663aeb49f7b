import assert from "node:assert/strict";
import {
  formatSse,
  SseDecoderStream,
  type SseEvent,
  SseParser,
} from "../gateway/formats/sse_stream.ts";

const STREAM = [
  ": keep-alive\n\n",
  'event: message_start\ndata: {"a":1}\n\n',
  "data: line one\ndata: line two\n\n",
  "event: ping\r\ndata: {}\r\n\r\n",
  "id: 7\nretry: 10\ndata:no-space\n\n",
  "data: héllo wörld ✓\n\n",
].join("");

function parseIn(pieces: Uint8Array[]): SseEvent[] {
  const parser = new SseParser();
  return [...pieces.flatMap((p) => parser.push(p)), ...parser.end()];
}

Deno.test("SSE blocks parse the same at every split point, and raw text round-trips", () => {
  const bytes = new TextEncoder().encode(STREAM);
  const whole = parseIn([bytes]);
  assert.deepEqual(whole.map((e) => [e.event, e.data, e.comment]), [
    [undefined, undefined, true],
    ["message_start", '{"a":1}', false],
    [undefined, "line one\nline two", false],
    ["ping", "{}", false],
    [undefined, "no-space", false],
    [undefined, "héllo wörld ✓", false],
  ]);
  assert.equal(whole.map((e) => e.raw).join(""), STREAM);
  for (let cut = 1; cut < bytes.byteLength; cut++) {
    const split = parseIn([bytes.slice(0, cut), bytes.slice(cut)]);
    assert.deepEqual(split, whole, `split at byte ${cut}`);
  }
});

Deno.test("a last block without its blank line is still delivered", () => {
  const events = parseIn([new TextEncoder().encode("data: [DONE]")]);
  assert.deepEqual(events.map((e) => e.data), ["[DONE]"]);
});

Deno.test("the stream wrapper and the encoder agree", async () => {
  const text = formatSse({ event: "x", data: "a\nb" }) + formatSse({ comment: "keep-alive" });
  const events = await Array.fromAsync(
    ReadableStream.from([new TextEncoder().encode(text)]).pipeThrough(new SseDecoderStream()),
  );
  assert.deepEqual(events.map((e) => [e.event, e.data, e.comment]), [
    ["x", "a\nb", false],
    [undefined, undefined, true],
  ]);
});

Deno.test("CR and mixed line ends split the same at every point", () => {
  const text = "data: a\r\rdata: b\r\r\ndata: c\n\r\ndata: d\r\n\ndata: e\r\n\r\n";
  const bytes = new TextEncoder().encode(text);
  const whole = parseIn([bytes]);
  assert.deepEqual(whole.map((e) => e.data), ["a", "b", "c", "d", "e"]);
  assert.equal(whole.map((e) => e.raw).join(""), text);
  for (let cut = 1; cut < bytes.byteLength; cut++) {
    assert.deepEqual(parseIn([bytes.slice(0, cut), bytes.slice(cut)]), whole, `split at ${cut}`);
  }
  // One byte at a time: every terminator straddles chunks.
  assert.deepEqual(parseIn([...bytes].map((b) => new Uint8Array([b]))), whole);
});
