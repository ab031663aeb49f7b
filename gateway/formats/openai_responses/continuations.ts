import type { IrContinuation } from "../ir.ts";
import { clientError } from "../../runtime/gateway_error.ts";
import { isRecord } from "../../runtime/json.ts";
import { optionalString, requireString } from "../request_fields.ts";

type Json = Record<string, unknown>;

/**
 * The handles of OpenAI-kept state a Responses body names (docs/design.md "Continuation ids"):
 * `previous_response_id`, `conversation` (an id, or `{id}`), and the id of each
 * `item_reference` input item, which OpenAI resolves to a stored item. A stored prompt
 * (`prompt.id`) is not one: the operator makes it at OpenAI, no answer hands it out.
 */
export function responsesContinuations(b: Json): IrContinuation[] {
  const out: IrContinuation[] = [];
  const previous = optionalString(b.previous_response_id, "previous_response_id");
  if (previous !== undefined) out.push({ param: "previous_response_id", value: previous });
  const conversation = conversationId(b.conversation);
  if (conversation !== undefined) out.push({ param: "conversation", value: conversation });
  if (Array.isArray(b.input)) {
    b.input.forEach((item, i) => {
      if (!isRecord(item) || item.type !== "item_reference") return;
      const param = `input[${i}].id`;
      out.push({ param, value: requireString(item.id, param) });
    });
  }
  return out;
}

function conversationId(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === "string") return value;
  if (isRecord(value) && typeof value.id === "string") return value.id;
  throw clientError("'conversation' must be a conversation id or an object with its 'id'", {
    param: "conversation",
  });
}

/**
 * The handles a Response object hands back: its id (a later `previous_response_id`), its
 * conversation's, and its output items' (a later `item_reference`).
 */
export function responseContinuations(response: Json): string[] {
  const out: string[] = [];
  if (typeof response.id === "string") out.push(response.id);
  const conversation = response.conversation;
  if (typeof conversation === "string") out.push(conversation);
  else if (isRecord(conversation) && typeof conversation.id === "string") {
    out.push(conversation.id);
  }
  if (Array.isArray(response.output)) {
    for (const item of response.output) {
      if (isRecord(item) && typeof item.id === "string") out.push(item.id);
    }
  }
  return out;
}

/** The handles one stream event hands back: its response's, or its output item's id. */
export function responsesEventContinuations(payload: Json): string[] {
  if (isRecord(payload.response)) return responseContinuations(payload.response);
  if (isRecord(payload.item) && typeof payload.item.id === "string") return [payload.item.id];
  return [];
}
