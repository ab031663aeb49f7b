import type { UpstreamCall } from "./format.ts";
import { clientBytes } from "./json_guard.ts";
import { nextTurn, OWN_TURN_BYTES } from "../runtime/loop_turn.ts";

/**
 * The JSON text of upstream request bodies, made once per request: a request
 * that fails over sends the same body again and again, and a 32 MB body
 * costs a real serialisation each time. Texts are kept against the objects
 * they are made from (the client's parsed body, the request's IR), which
 * live as long as the request, so nothing outlives it.
 */
const texts = new WeakMap<object, Map<string, string>>();

/**
 * A body made from the request's IR, built and serialised once per target
 * kind and model (the model shapes translations: default max_tokens, which
 * sampling fields go). `variant` names whatever else of the upstream the
 * body depends on.
 */
export function translatedText(
  call: Pick<UpstreamCall, "ir" | "model" | "upstream">,
  opts: { build: () => unknown; variant?: string },
): string {
  const key = `${call.upstream.kind}\n${call.model}\n${opts.variant ?? ""}`;
  return remembered(call.ir, { key, make: () => JSON.stringify(opts.build()) });
}

/** A random word no client can send, so it is found only where we put it. */
const MODEL_MARK = JSON.stringify(`pulsegate-model-${crypto.randomUUID()}`);

/**
 * The client's own body with its model swapped (or left alone where the model
 * is in the URL, `model` undefined), as text. It is serialised once per
 * request with a mark for the model; each hop splices its model in.
 */
export function passthroughText(body: Record<string, unknown>, model?: string): string {
  if (model === undefined) {
    return remembered(body, { key: "as sent", make: () => JSON.stringify(body) });
  }
  const template = remembered(body, {
    key: "model marked",
    make: () => JSON.stringify({ ...body, model: JSON.parse(MODEL_MARK) }),
  });
  const at = template.indexOf(MODEL_MARK);
  return template.slice(0, at) + JSON.stringify(model) + template.slice(at + MODEL_MARK.length);
}

/**
 * The client's own body reshaped for one kind of upstream (Claude on Vertex: no `model`, its
 * version in the body), as text, serialised once per request and `key`.
 */
export function reshapedText(
  body: Record<string, unknown>,
  opts: { key: string; reshape: (body: Record<string, unknown>) => unknown },
): string {
  return remembered(body, {
    key: `reshaped ${opts.key}`,
    make: () => JSON.stringify(opts.reshape(body)),
  });
}

/**
 * Makes an upstream body, giving the serving thread back before and after
 * when the client's body was large: parsing it, serialising it and encoding
 * it for the wire then each hold the thread once, rather than all three
 * back to back, and other requests are served in between.
 */
export async function ownTurn<T>(
  call: Pick<UpstreamCall, "ir" | "passthrough">,
  make: () => T,
): Promise<T> {
  if (clientBytes(call.passthrough ?? call.ir) < OWN_TURN_BYTES) return make();
  await nextTurn();
  const made = make();
  await nextTurn();
  return made;
}

function remembered(source: object, opts: { key: string; make: () => string }): string {
  let bySource = texts.get(source);
  if (!bySource) texts.set(source, bySource = new Map());
  let text = bySource.get(opts.key);
  if (text === undefined) bySource.set(opts.key, text = opts.make());
  return text;
}
