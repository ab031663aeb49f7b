import { isRecord } from "../../runtime/json.ts";

/** Whether a Chat body asks for the usage chunk (`stream_options.include_usage`). */
export function chatAskedUsage(body: Record<string, unknown>): boolean {
  return isRecord(body.stream_options) && body.stream_options.include_usage === true;
}

/** Bodies with usage asked for, kept per client body so its serialisation is made once. */
const asking = new WeakMap<Record<string, unknown>, Record<string, unknown>>();

/**
 * The client's streamed Chat body, asking its upstream for usage (docs/observability.md
 * "Token usage"): every attempt's row then has the tokens it billed. The usage-only chunk this
 * adds is taken out again for a client that did not ask (forward/usage_chunk.ts).
 */
export function askingUsage(body: Record<string, unknown>): Record<string, unknown> {
  if (body.stream !== true || chatAskedUsage(body)) return body;
  let asked = asking.get(body);
  if (!asked) {
    const options = isRecord(body.stream_options) ? body.stream_options : {};
    asked = { ...body, stream_options: { ...options, include_usage: true } };
    asking.set(body, asked);
  }
  return asked;
}
