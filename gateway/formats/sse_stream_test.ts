import assert from "node:assert/strict";
import { formatSse, SseDecoderStream, type SseEvent, SseParser } from "./sse_stream.ts";

const STREAM = [
  ": keep-alive\n\n",
  'event: message_start\ndata: {"a":1}\n\n',
  "data: line one\ndata: line two\n\n",
  "event: ping\r\ndata: {}\r\n\r\n",
  "id: 7\nretry: 10\ndata:no-space\n\n",
  "data: héllo wörld ✓\n\n",
].join("");

const utf8 = new TextEncoder();

/**
 * Parses pieces the way the stream path feeds them: each through one buffer the
 * next piece overwrites. Any event's `bytes` must be its raw text's UTF-8 and
 * must survive that reuse; they are checked here and left out of the result.
 */
function parseIn(pieces: Uint8Array[]): SseEvent[] {
  const parser = new SseParser();
  const buffer = new Uint8Array(Math.max(1, ...pieces.map((p) => p.byteLength)));
  const events: SseEvent[] = [];
  for (const piece of pieces) {
    buffer.set(piece);
    events.push(...parser.push(buffer.subarray(0, piece.byteLength)));
  }
  buffer.fill(0);
  events.push(...parser.end());
  return events.map(({ bytes, ...event }) => {
    if (bytes) assert.deepEqual(bytes, utf8.encode(event.raw), `bytes of ${event.raw}`);
    return event;
  });
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

Deno.test("events cut from a chunk that starts a block carry its bytes, and only then", () => {
  const parser = new SseParser();
  const two = utf8.encode('data: {"a":1}\n\n: keep-alive\n\n');
  const [first, second] = parser.push(two);
  assert.deepEqual(first?.bytes, utf8.encode('data: {"a":1}\n\n'));
  assert.deepEqual(second?.bytes, utf8.encode(": keep-alive\n\n"));
  // Views of one copy: passed on together they are the chunk again.
  assert.equal(first?.bytes?.buffer, second?.bytes?.buffer);
  assert.notEqual(first?.bytes?.buffer, two.buffer);
  // A chunk finishing a block begun in the one before: its text is not all its own.
  parser.push(utf8.encode("data: {"));
  assert.equal(parser.push(utf8.encode('"b":2}\n\n'))[0]?.bytes, undefined);
  // Characters of more than one byte: offsets in the text are not offsets in the bytes.
  assert.equal(parser.push(utf8.encode('data: "é"\n\n'))[0]?.bytes, undefined);
  // A chunk ending inside a character, after a whole block: the next chunk's text is as long
  // as its bytes, but starts with a character whose first byte came before.
  const stray = utf8.encode("data: 1\n\né\n\n");
  const cut = stray.indexOf(0xc3) + 1;
  parser.push(stray.slice(0, cut));
  const after = stray.slice(cut);
  const [strayEvent] = parser.push(after);
  assert.equal(strayEvent?.raw.length, after.byteLength);
  assert.equal(strayEvent?.bytes, undefined);
});
