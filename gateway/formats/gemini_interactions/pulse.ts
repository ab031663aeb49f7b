import { isRecord } from "../../runtime/json.ts";
import { hasSubstance } from "../gemini/fields.ts";

/** Statuses that say the interaction is alive and nothing has been said yet. */
const WAITING = new Set(["in_progress", "queued"]);

/** Step types that carry no output of the model: the input echoed back. */
const INPUT_STEPS = new Set(["user_input"]);

/**
 * docs/design.md "Pulse" for the Interactions API (docs/interactions.md "Pulse"): the lifecycle
 * events `interaction.created` and `interaction.status_update` while the interaction is only in
 * progress or queued are keep-alives, as are keep-alive events by name (`ping`, `heartbeat`), a
 * step that echoes the input, and a delta with nothing in it. Every other step event (a step's
 * start names what the model does next, as Anthropic's block starts do; a thought signature is
 * output), `interaction.completed`, `error`, `[DONE]` and any event we do not know is content,
 * so a new event type never makes a live stream look idle.
 */
export function interactionsEventIsContent(type: string | undefined, payload: unknown): boolean {
  if (type === undefined || !isRecord(payload)) return true;
  switch (type) {
    case "interaction.created":
    case "ping":
    case "heartbeat":
      return false;
    case "interaction.status_update":
      return !WAITING.has(String(payload.status));
    case "step.start": {
      const step = isRecord(payload.step) ? payload.step : {};
      return !INPUT_STEPS.has(String(step.type));
    }
    case "step.delta":
      return deltaHasSubstance(payload.delta);
    default:
      return true;
  }
}

/** A delta with anything in it besides its type: an empty text delta is padding. */
function deltaHasSubstance(delta: unknown): boolean {
  if (!isRecord(delta)) return true;
  return Object.entries(delta).some(([key, value]) => key !== "type" && hasSubstance(value));
}
