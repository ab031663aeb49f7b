/**
 * Google's Interactions API (`/v1beta/interactions`) for fake upstreams: bodies from a small
 * script with the event order, fields and usage the API documents (docs/interactions.md cites the
 * sources), and a stateful handler that stores interactions as the API does, so a test can
 * check that a turn, a get, a cancel or a delete reached the upstream that stored them.
 */
import type { Call, Script } from "./server.ts";

export interface InteractionsScript {
  /** Text deltas of the answer's model_output step. */
  text: string[];
  /** Thought-summary deltas, in a thought step before the text. */
  thinking?: string[];
  /** A function call step after the text: its arguments streamed as `arguments_delta`s. */
  toolCall?: { id: string; name: string; argsPieces: string[] };
  /** `output` counts thoughts too, as the gateway records it. */
  usage: { input: number; output: number; cached?: number; thoughts?: number };
  /** Default `completed` (`requires_action` when a call is made). */
  status?: string;
  /** `interaction.status_update` keep-alives after `interaction.created`. */
  pingFirst?: number;
  id?: string;
  model?: string;
  /**
   * A continuation token the answer hands back (status `requires_continuation` unless set):
   * in the whole Interaction, and in a stream's `interaction.completed`.
   */
  continuationToken?: string;
  /** A mid-stream checkpoint: an `interaction.status_update` carrying its own token. */
  checkpointToken?: string;
}

type Json = Record<string, unknown>;

const MODEL = "gemini-3-flash-preview";
const CREATED = "2026-06-09T12:01:25Z";

function idOf(script: InteractionsScript): string {
  return script.id ?? "v1_ChdpQUFvYXJfakRNWWs3a0xHaVBnVjhNQRIXaUFBb2FyX2pETVlrN2tMR2lQZ1Y4TUE";
}

function statusOf(script: InteractionsScript): string {
  if (script.status) return script.status;
  if (script.continuationToken) return "requires_continuation";
  return script.toolCall ? "requires_action" : "completed";
}

/** The token field of an Interaction, where the script hands one back. */
function tokenField(script: InteractionsScript): Json {
  return script.continuationToken ? { continuation_token: script.continuationToken } : {};
}

function usageJson(script: InteractionsScript): Json {
  const { input, output, cached, thoughts } = script.usage;
  return {
    total_tokens: input + output,
    total_input_tokens: input,
    input_tokens_by_modality: [{ modality: "text", tokens: input }],
    total_cached_tokens: cached ?? 0,
    total_output_tokens: output - (thoughts ?? 0),
    total_tool_use_tokens: 0,
    total_thought_tokens: thoughts ?? 0,
  };
}

/** The steps of the whole answer, as `stream: false` returns them. */
function steps(script: InteractionsScript): Json[] {
  const out: Json[] = [];
  if (script.thinking?.length) {
    out.push({
      type: "thought",
      signature: "EpYCCpMCAb4+9vtFakeSignatureForTestsOnly",
      summary: [{ type: "text", text: script.thinking.join("") }],
    });
  }
  if (script.text.length) {
    out.push({ type: "model_output", content: [{ type: "text", text: script.text.join("") }] });
  }
  const call = script.toolCall;
  if (call) {
    const args = call.argsPieces.join("");
    out.push({
      type: "function_call",
      id: call.id,
      name: call.name,
      arguments: args ? JSON.parse(args) : {},
    });
  }
  return out;
}

/** The whole Interaction (`stream` off). */
export function interactionsWholeBody(script: InteractionsScript): string {
  return JSON.stringify({
    id: idOf(script),
    status: statusOf(script),
    usage: usageJson(script),
    created: CREATED,
    updated: CREATED,
    steps: steps(script),
    service_tier: "standard",
    object: "interaction",
    model: script.model ?? MODEL,
    ...tokenField(script),
  });
}

function event(type: string, fields: Json): string {
  return `event: ${type}\ndata: ${JSON.stringify({ ...fields, event_type: type })}\n\n`;
}

/** `interaction.status_update` while in progress: the API's own keep-alive. */
export function statusUpdate(script: Pick<InteractionsScript, "id">): string {
  return event("interaction.status_update", {
    interaction_id: idOf(script as InteractionsScript),
    status: "in_progress",
  });
}

/**
 * The streamed body, one SSE event per chunk, in the documented order: `interaction.created`,
 * `pingFirst` status updates, then per step `step.start`, its deltas and `step.stop`, then
 * `interaction.completed` with the usage, and `event: done` / `[DONE]`.
 */
export function interactionsStreamChunks(script: InteractionsScript): string[] {
  const id = idOf(script);
  const model = script.model ?? MODEL;
  const chunks = [
    event("interaction.created", {
      interaction: { id, status: "in_progress", object: "interaction", model },
    }),
  ];
  for (let i = 0; i < (script.pingFirst ?? 1); i++) chunks.push(statusUpdate(script));
  if (script.checkpointToken) {
    chunks.push(event("interaction.status_update", {
      interaction_id: id,
      status: "in_progress",
      continuation_token: script.checkpointToken,
    }));
  }
  let index = 0;
  if (script.thinking?.length) {
    chunks.push(event("step.start", { index, step: { type: "thought" } }));
    chunks.push(event("step.delta", {
      index,
      delta: { signature: "EpYCCpMCAb4+9vtFakeSignatureForTestsOnly", type: "thought_signature" },
    }));
    for (const text of script.thinking) {
      chunks.push(event("step.delta", {
        index,
        delta: { type: "thought_summary", content: { type: "text", text } },
      }));
    }
    chunks.push(event("step.stop", { index }));
    index++;
  }
  if (script.text.length) {
    chunks.push(event("step.start", { index, step: { type: "model_output" } }));
    for (const text of script.text) {
      chunks.push(event("step.delta", { index, delta: { text, type: "text" } }));
    }
    chunks.push(event("step.stop", { index }));
    index++;
  }
  const call = script.toolCall;
  if (call) {
    chunks.push(event("step.start", {
      index,
      step: { type: "function_call", id: call.id, name: call.name, arguments: {} },
    }));
    for (const piece of call.argsPieces) {
      chunks.push(event("step.delta", {
        index,
        delta: { type: "arguments_delta", arguments: piece },
      }));
    }
    chunks.push(event("step.stop", { index }));
  }
  chunks.push(event("interaction.completed", {
    interaction: {
      id,
      status: statusOf(script),
      usage: usageJson(script),
      created: CREATED,
      updated: CREATED,
      service_tier: "standard",
      object: "interaction",
      model,
      ...tokenField(script),
    },
  }));
  chunks.push("event: done\ndata: [DONE]\n\n");
  return chunks;
}

/** An error the API reports inside a stream (its documented `error` event). */
export function errorEvent(message: string, code = "internal_error"): string {
  return event("error", { error: { message, code } });
}

const STATUS_NAMES: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  429: "RESOURCE_EXHAUSTED",
  500: "INTERNAL",
  503: "UNAVAILABLE",
  504: "DEADLINE_EXCEEDED",
};

/** An HTTP error body: Google's google.rpc error object. */
export function errorBody(status: number, message: string): string {
  return JSON.stringify({
    error: { code: status, message, status: STATUS_NAMES[status] ?? "UNKNOWN" },
  });
}

/** A whole or streamed answer to `call`, by the body's `stream`. */
export function answer(call: Call, script: InteractionsScript): Script {
  const stream = (call.json as { stream?: boolean } | undefined)?.stream === true;
  return {
    headers: { "content-type": stream ? "text/event-stream" : "application/json" },
    body: (stream ? interactionsStreamChunks(script) : [interactionsWholeBody(script)])
      .map((send) => ({ send })),
  };
}

/** An interaction this fake stored, and what it was asked. */
export interface Stored {
  id: string;
  body: Json;
  status: string;
}

/**
 * A fake Interactions upstream that keeps what it answered, as the API does: each create gets
 * a fresh id (`{prefix}_{n}`) and is stored unless `store: false`; a `previous_interaction_id`
 * it did not store is refused with 404, as is a get, cancel or delete of one; a delete forgets
 * it. `key` is the API key it wants in `x-goog-api-key`.
 */
export function storingInteractions(
  opts: { prefix: string; key?: string; text?: string[] },
): { handler: (call: Call) => Script; stored: Map<string, Stored> } {
  const stored = new Map<string, Stored>();
  let n = 0;
  const json = { "content-type": "application/json" };
  const fail = (status: number, message: string): Script => ({
    status,
    headers: json,
    body: [{ send: errorBody(status, message) }],
  });
  const handler = (call: Call): Script => {
    if (opts.key && call.headers.get("x-goog-api-key") !== opts.key) {
      return fail(401, "API key not valid");
    }
    const path = new URL(call.path, "http://fake").pathname;
    const match = /^\/v1beta\/interactions(?:\/([^/]+))?(\/cancel)?$/.exec(path);
    if (!match) return fail(404, `no such path ${path}`);
    const id = match[1] === undefined ? undefined : decodeURIComponent(match[1]);
    if (id === undefined) {
      if (call.method !== "POST") return fail(405, "method");
      const body = (call.json ?? {}) as Json;
      const previous = body.previous_interaction_id;
      if (typeof previous === "string" && !stored.has(previous)) {
        return fail(404, `Interaction ${previous} not found.`);
      }
      const made = `${opts.prefix}_${++n}`;
      if (body.background === true) {
        // A background run answers at once, in progress; the client polls it with a get.
        stored.set(made, { id: made, body, status: "in_progress" });
        const run = { id: made, status: "in_progress", object: "interaction", model: MODEL };
        return { headers: json, body: [{ send: JSON.stringify(run) }] };
      }
      if (body.store !== false) stored.set(made, { id: made, body, status: "completed" });
      return answer(call, {
        id: made,
        text: opts.text ?? ["Hel", "lo"],
        usage: { input: 7, output: 5 },
      });
    }
    const found = stored.get(id);
    if (!found) return fail(404, `Interaction ${id} not found.`);
    if (match[2] && call.method === "POST") {
      found.status = "cancelled";
      return {
        headers: json,
        body: [{ send: JSON.stringify({ id, status: "cancelled", object: "interaction" }) }],
      };
    }
    if (call.method === "DELETE") {
      stored.delete(id);
      return { headers: json, body: [{ send: "{}" }] };
    }
    if (call.method === "GET") {
      if (call.path.includes("stream=true")) {
        return {
          headers: { "content-type": "text/event-stream" },
          body: interactionsStreamChunks({ id, text: ["Stored"], usage: { input: 1, output: 1 } })
            .map((send) => ({ send })),
        };
      }
      return {
        headers: json,
        body: [{
          send: interactionsWholeBody({ id, text: ["Stored"], usage: { input: 1, output: 1 } }),
        }],
      };
    }
    return fail(405, "method");
  };
  return { handler, stored };
}
