/**
 * The client formats of the fault matrix: how each asks, with which upstream
 * kinds (its own and one it is translated to), and what a client of that
 * format read back, from the raw bytes: how many answers started, the text,
 * and how the answer ended. Raw, not through an SDK, so a byte from an
 * abandoned hop cannot be smoothed over.
 */
import type { UpstreamKind } from "../../gateway/formats/format.ts";
import { SseParser } from "../../gateway/formats/sse_stream.ts";

export interface ClientView {
  /** Answer starts seen (Chat's assistant role, Responses' created, Anthropic's message_start). */
  starts: number;
  text: string;
  end: "done" | "error" | "none";
  /** The error event or body, as sent. */
  error?: string;
  /** Bytes of the answer after its end (there must be none). */
  trailing: boolean;
  /** Tool calls read, each its name then its arguments' JSON text, by the stream's own index. */
  calls: string[];
  /** A Gemini SSE error was repeated as a `data:` event (not trailing bytes). */
  repeated?: boolean;
}

export interface ClientFormat {
  name: string;
  /** Its own upstream kind first, then those it is translated to. */
  kinds: [UpstreamKind, UpstreamKind, ...UpstreamKind[]];
  /** Gemini's streamed JSON array is never answered early (docs/design.md "Failover before content"). */
  answersEarly: boolean;
  streamOnly?: boolean;
  request(route: string, stream: boolean): { path: string; body: unknown };
  readStream(body: string): ClientView;
  wholeText(json: unknown): string;
}

type Json = Record<string, unknown>;
const user = "hi";

/** Runs over SSE data blocks, with each block's event name. */
function sseData(body: string): { event?: string; data: string }[] {
  const parser = new SseParser();
  const events = [...parser.push(new TextEncoder().encode(body)), ...parser.end()];
  // Google's SDKs also read a bare JSON object (how Gemini tells an error after the 200).
  const bare = (raw: string) => (raw.trim().startsWith("{") ? [{ data: raw.trim() }] : []);
  return events.flatMap((e) =>
    e.data === undefined ? (e.comment ? [] : bare(e.raw)) : [{ event: e.event, data: e.data }]
  );
}

function view(): ClientView {
  return { starts: 0, text: "", end: "none", trailing: false, calls: [] };
}

/** Adds to the call at `index` (a call's name first, then its arguments). */
function addToCall(v: ClientView, index: unknown, text: unknown): void {
  if (typeof index !== "number" || typeof text !== "string") return;
  v.calls[index] = (v.calls[index] ?? "") + text;
}

/** Records what came after the end, then hands the block to `read` while the answer is open. */
function reader(read: (v: ClientView, block: { event?: string; data: string }) => void) {
  return (body: string): ClientView => {
    const v = view();
    for (const block of sseData(body)) {
      if (v.end !== "none") v.trailing = true;
      else read(v, block);
    }
    return v;
  };
}

function parse(data: string): Json {
  try {
    return JSON.parse(data);
  } catch {
    return { unparsable: data };
  }
}

const geminiText = (chunk: Json): string => {
  const candidate = (chunk.candidates as Json[] | undefined)?.[0];
  const parts = ((candidate?.content as Json | undefined)?.parts ?? []) as Json[];
  return parts.filter((p) => !p.thought).map((p) => p.text ?? "").join("");
};

/** Gemini sends each call whole: its name and its arguments as JSON. */
const geminiCalls = (chunk: Json): string[] => {
  const candidate = (chunk.candidates as Json[] | undefined)?.[0];
  const parts = ((candidate?.content as Json | undefined)?.parts ?? []) as Json[];
  return parts.flatMap((p) => {
    const call = p.functionCall as Json | undefined;
    return call ? [`${call.name}${JSON.stringify(call.args ?? {})}`] : [];
  });
};

/**
 * Gemini has no end marker: an answer is done when a finish reason came and no error after it.
 * An SSE error comes twice, the bare object then the same as a `data:` event
 * (docs/formats.md "Gemini errors inside a stream"): the repeat is not trailing bytes.
 */
function readGemini(chunks: { json: Json; raw: string }[]): ClientView {
  const v = view();
  let finished = false;
  for (const { json, raw } of chunks) {
    if (v.end === "error" && raw === v.error && !v.repeated) v.repeated = true;
    else if (v.end === "error") v.trailing = true;
    else if (json.error !== undefined || json.unparsable !== undefined) {
      v.end = "error";
      v.error = raw;
    } else {
      v.starts = 1;
      v.text += geminiText(json);
      for (const call of geminiCalls(json)) v.calls.push(call);
      const candidate = (json.candidates as Json[] | undefined)?.[0];
      finished ||= Boolean(candidate?.finishReason);
    }
  }
  if (v.end === "none" && finished) v.end = "done";
  return v;
}

const geminiRequest = (stream: boolean, sse: boolean) => (route: string) => ({
  path: `/v1beta/models/${route}:${stream ? "streamGenerateContent" : "generateContent"}${
    stream && sse ? "?alt=sse" : ""
  }`,
  body: { contents: [{ role: "user", parts: [{ text: user }] }] },
});

export const CLIENTS: ClientFormat[] = [
  {
    name: "chat",
    // And the Interactions API translated: every fault of it, read back as Chat.
    kinds: ["openai-chat", "anthropic", "gemini-interactions"],
    answersEarly: true,
    request: (route, stream) => ({
      path: "/v1/chat/completions",
      body: { model: route, stream, messages: [{ role: "user", content: user }] },
    }),
    readStream: reader((v, { data }) => {
      if (data.trim() === "[DONE]") return void (v.end = "done");
      const chunk = parse(data);
      if (chunk.error !== undefined || chunk.unparsable !== undefined) {
        v.end = "error";
        v.error = data;
        return;
      }
      const delta = ((chunk.choices as Json[] | undefined)?.[0]?.delta ?? {}) as Json;
      if (delta.role === "assistant") v.starts++;
      if (typeof delta.content === "string") v.text += delta.content;
      for (const call of (delta.tool_calls ?? []) as Json[]) {
        const fn = (call.function ?? {}) as Json;
        addToCall(v, call.index, fn.name);
        addToCall(v, call.index, fn.arguments);
      }
    }),
    wholeText: (json) =>
      String((((json as Json).choices as Json[])[0]!.message as Json).content ?? ""),
  },
  {
    name: "responses",
    kinds: ["openai-responses", "openai-chat"],
    answersEarly: true,
    request: (route, stream) => ({
      path: "/v1/responses",
      body: { model: route, stream, input: user },
    }),
    // A failure may be told twice, as it is to the SDK: an `error` event, then `response.failed`.
    readStream: (body) => {
      const v = view();
      for (const { data } of sseData(body)) {
        const event = parse(data);
        if (v.end !== "none" && !(v.error !== undefined && event.type === "response.failed")) {
          v.trailing = true;
        } else if (event.type === "response.created") v.starts++;
        else if (event.type === "response.output_text.delta") v.text += String(event.delta);
        else if (event.type === "response.output_item.added") {
          const item = event.item as Json;
          if (item.type === "function_call") addToCall(v, event.output_index, item.name);
        } else if (event.type === "response.function_call_arguments.delta") {
          addToCall(v, event.output_index, event.delta);
        } else if (event.type === "response.completed") v.end = "done";
        else if (
          event.type === "response.failed" || event.type === "error" ||
          event.unparsable !== undefined
        ) {
          v.end = "error";
          v.error ??= data;
        }
      }
      return v;
    },
    wholeText: (json) =>
      ((json as Json).output as Json[])
        .flatMap((item) => (item.content ?? []) as Json[])
        .filter((part) => part.type === "output_text")
        .map((part) => part.text)
        .join(""),
  },
  {
    name: "anthropic",
    kinds: ["anthropic", "bedrock"],
    answersEarly: true,
    request: (route, stream) => ({
      path: "/v1/messages",
      body: { model: route, stream, max_tokens: 100, messages: [{ role: "user", content: user }] },
    }),
    readStream: reader((v, { data }) => {
      const event = parse(data);
      if (event.type === "message_start") v.starts++;
      else if (event.type === "content_block_start") {
        const block = event.content_block as Json;
        if (block.type === "tool_use") addToCall(v, event.index, block.name);
      } else if (event.type === "content_block_delta") {
        const delta = event.delta as Json;
        if (delta.type === "text_delta") v.text += String(delta.text);
        if (delta.type === "input_json_delta") addToCall(v, event.index, delta.partial_json);
      } else if (event.type === "message_stop") v.end = "done";
      else if (event.type === "error" || event.unparsable !== undefined) {
        v.end = "error";
        v.error = data;
      }
    }),
    wholeText: (json) =>
      ((json as Json).content as Json[]).filter((b) => b.type === "text").map((b) => b.text).join(
        "",
      ),
  },
  {
    name: "gemini-sse",
    kinds: ["gemini", "openai-responses"],
    answersEarly: true,
    request: (route, stream) => geminiRequest(stream, true)(route),
    readStream: (body) =>
      readGemini(sseData(body).map(({ data }) => ({ json: parse(data), raw: data }))),
    wholeText: (json) => geminiText(json as Json),
  },
  {
    name: "interactions",
    kinds: ["gemini-interactions", "anthropic"],
    answersEarly: true,
    request: (route, stream) => ({
      path: "/v1beta/interactions",
      body: { model: route, stream, input: user },
    }),
    // `[DONE]` follows `interaction.completed`; nothing follows an `error` event.
    readStream: (body) => {
      const v = view();
      let done = false;
      for (const { data } of sseData(body)) {
        if (v.end === "done" && data.trim() === "[DONE]" && !done) {
          done = true;
          continue;
        }
        if (v.end !== "none") {
          v.trailing = true;
          continue;
        }
        const event = parse(data);
        const delta = (event.delta ?? {}) as Json;
        const step = (event.step ?? {}) as Json;
        if (event.event_type === "interaction.created") v.starts++;
        else if (event.event_type === "step.delta" && delta.type === "text") {
          v.text += String(delta.text);
        } else if (event.event_type === "step.start" && step.type === "function_call") {
          addToCall(v, event.index, step.name);
        } else if (event.event_type === "step.delta" && delta.type === "arguments_delta") {
          addToCall(v, event.index, delta.arguments);
        } else if (event.event_type === "interaction.completed") v.end = "done";
        else if (event.event_type === "error" || event.unparsable !== undefined) {
          v.end = "error";
          v.error = data;
        }
      }
      return v;
    },
    wholeText: (json) =>
      (((json as Json).steps ?? []) as Json[])
        .filter((step) => step.type === "model_output")
        .flatMap((step) => (step.content ?? []) as Json[])
        .filter((c) => c.type === "text")
        .map((c) => c.text)
        .join(""),
  },
  {
    name: "gemini-array",
    kinds: ["gemini", "openai-chat"],
    answersEarly: false,
    streamOnly: true,
    request: (route, stream) => geminiRequest(stream, false)(route),
    readStream: (body) => {
      let chunks: unknown;
      try {
        chunks = JSON.parse(body);
      } catch {
        return { ...view(), error: body };
      }
      // An error body where a stream was expected is a problem to report, not a crash of the pool.
      if (!Array.isArray(chunks)) return { ...view(), error: body };
      return readGemini(chunks.map((json: Json) => ({ json, raw: JSON.stringify(json) })));
    },
    wholeText: (json) => geminiText(json as Json),
  },
];
