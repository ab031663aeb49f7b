import type { ConfigInput } from "../config/schema.ts";
import { type Clock, REAL_TIME } from "../runtime/clock.ts";
import { formatSse } from "../formats/sse_stream.ts";
import { isRecord } from "../runtime/json.ts";
import { readJsonBody } from "../accept/read_body.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import { isLoopback } from "../runtime/loopback.ts";

/**
 * The built-in demo profile (docs/design.md "Settings"): three SIMULATED Chat Completions
 * upstreams served by this same process under /_demo/, so a newcomer sees
 * failover with no API keys. Nothing here talks to a real provider.
 */
export const DEMO_PREFIX = "/_demo";

export function demoConfig(origin: string): ConfigInput {
  const upstream = (id: string) => ({
    id: `simulated-${id}`,
    kind: "openai-chat" as const,
    base_url: `${origin}${DEMO_PREFIX}/${id}/v1`,
  });
  return {
    failover: { idle_timeout_secs: 30 },
    upstreams: [upstream("error"), upstream("silent"), upstream("healthy")],
    routes: [{
      model: "demo",
      candidates: [
        { upstream: "simulated-error", model: "sim-error" },
        { upstream: "simulated-silent", model: "sim-silent" },
        { upstream: "simulated-healthy", model: "sim-healthy" },
      ],
    }],
  };
}

const encoder = new TextEncoder();

function isOwnCall(caller: Deno.NetAddr | undefined, self: string): boolean {
  if (!caller) return false;
  const host = caller.hostname.replace(/^::ffff:/, "");
  return isLoopback(host) || host === self.replace(/^\[|\]$/g, "");
}

/** An error in the Chat Completions shape the simulated upstreams speak. */
function demoError(status: number, message: string): Response {
  const type = status >= 500 ? "server_error" : "invalid_request_error";
  return Response.json({ error: { message, type, code: null } }, { status });
}

const WORDS = "Hello from the simulated healthy upstream. Failover worked: you are reading me."
  .split(" ");

/**
 * Serves a simulated upstream; null when the path is not a demo path. Only the gateway itself
 * calls these (its demo config points at its own address), so other callers are refused: a
 * loopback peer, or the address the gateway listens on (`self`) when it listens on one
 * interface. Bodies are read with the proxy's own size limit.
 */
export async function serveDemoUpstream(
  request: Request,
  opts: { clock: Clock; caller: Deno.NetAddr | undefined; self: string },
): Promise<Response | null> {
  const match = new URL(request.url).pathname.match(/^\/_demo\/(\w+)\/v1\/chat\/completions$/);
  if (!match) return null;
  if (!isOwnCall(opts.caller, opts.self)) {
    return demoError(403, "the simulated upstreams answer only the gateway itself");
  }
  let body: unknown;
  try {
    body = await readJsonBody(request, { signal: request.signal });
  } catch (err) {
    const error = GatewayError.from(err);
    return demoError(error.status, error.message);
  }
  const stream = isRecord(body) && Boolean(body.stream);
  if (match[1] === "error") {
    return demoError(503, "simulated outage");
  }
  if (match[1] === "silent") {
    // 200, then nothing, until the gateway gives up on it.
    return new Response(new ReadableStream({ start() {} }), {
      headers: { "content-type": stream ? "text/event-stream" : "application/json" },
    });
  }
  if (!stream) return Response.json(wholeAnswer());
  return new Response(healthyStream(opts.clock), {
    headers: { "content-type": "text/event-stream" },
  });
}

function wholeAnswer() {
  return {
    id: "chatcmpl-demo",
    object: "chat.completion",
    created: Math.floor(REAL_TIME.now() / 1000),
    model: "sim-healthy",
    choices: [{
      index: 0,
      message: { role: "assistant", content: WORDS.join(" ") },
      finish_reason: "stop",
    }],
    usage: { prompt_tokens: 12, completion_tokens: WORDS.length, total_tokens: 12 + WORDS.length },
  };
}

function healthyStream(clock: Clock): ReadableStream<Uint8Array> {
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
    encoder.encode(formatSse({
      data: JSON.stringify({
        id: "chatcmpl-demo",
        object: "chat.completion.chunk",
        created: Math.floor(REAL_TIME.now() / 1000),
        model: "sim-healthy",
        choices: [{ index: 0, delta, finish_reason: finish }],
      }),
    }));
  let i = 0;
  return new ReadableStream({
    async pull(controller) {
      if (i > 0) await clock.sleep(40);
      if (i < WORDS.length) controller.enqueue(chunk({ content: (i ? " " : "") + WORDS[i] }));
      else if (i === WORDS.length) controller.enqueue(chunk({}, "stop"));
      else {
        const usage = {
          prompt_tokens: 12,
          completion_tokens: WORDS.length,
          total_tokens: 12 + WORDS.length,
        };
        controller.enqueue(
          encoder.encode(
            formatSse({
              data: JSON.stringify({
                id: "chatcmpl-demo",
                object: "chat.completion.chunk",
                choices: [],
                usage,
              }),
            }),
          ),
        );
        controller.enqueue(encoder.encode(formatSse({ data: "[DONE]" })));
        controller.close();
      }
      i++;
    },
  });
}
