import type { IrContinuation } from "../ir.ts";
import { isRecord } from "../../runtime/json.ts";
import { optionalString } from "../request_fields.ts";

type Json = Record<string, unknown>;

/**
 * The continuation token an Interactions body names (docs/design.md "Continuation ids"): it
 * resumes a decode stopped at the per-request limit, with `store` on or off, so it names
 * Google-kept state as an id does. `previous_interaction_id` is not listed: it is looked
 * up per key where it is stored (gateway/route/interaction_pin.ts).
 */
export function interactionsContinuations(b: Json): IrContinuation[] {
  const token = optionalString(b.continuation_token, "continuation_token");
  return token === undefined || token === "" ? [] : [{ param: "continuation_token", value: token }];
}

/**
 * The tokens one Interaction or stream event hands back: the interaction's `continuation_token`
 * (a whole answer, `interaction.created`, `interaction.completed`), and an event's own (a
 * mid-stream checkpoint in `interaction.status_update`), as `@google/genai` reads them.
 */
export function interactionsEventContinuations(payload: Json): string[] {
  const out: string[] = [];
  const interaction = isRecord(payload.interaction) ? payload.interaction : undefined;
  if (typeof interaction?.continuation_token === "string" && interaction.continuation_token) {
    out.push(interaction.continuation_token);
  }
  if (typeof payload.continuation_token === "string" && payload.continuation_token) {
    out.push(payload.continuation_token);
  }
  return out;
}
