import { type GatewayCode, GatewayError } from "../runtime/gateway_error.ts";
import { stopReason } from "./stop_reasons.ts";
import { isModelMissing } from "../formats/model_missing.ts";
import { type How, STATUS_ENDINGS } from "./verdict.ts";

/** How a hop ended (verdict.ts decides what follows); every ending but an answer has its error. */
export type HopEnding = { how: "answered"; error?: undefined } | {
  how: Exclude<How, "answered">;
  error: GatewayError;
};

export const ANSWERED: HopEnding = Object.freeze({ how: "answered" });

/** The reasons we stop a hop (they travel as its AbortSignal's reason), as endings. */
const STOPS: Partial<Record<GatewayCode, Exclude<How, "answered">>> = {
  "gw.request.aborted": "aborted",
  "gw.client.disconnected": "client_gone",
  "gw.gateway.shutting_down": "shutdown",
  "gw.upstream.hedge_lost": "hedge_lost",
  "gw.upstream.idle_timeout": "idle_timeout",
  "gw.upstream.idle_timeout_mid_stream": "idle_timeout",
  "gw.upstream.first_content_timeout": "first_content_timeout",
  "gw.upstream.deadline": "deadline",
};

/**
 * An upstream's error status, as decoded into `error` (docs/architecture.md "Errors"): the hop
 * ends as the verdict table says of the status's sort (`STATUS_ENDINGS`), which the error kept
 * from the one place a status is sorted (formats/upstream_status.ts); an error a format made
 * otherwise (Bedrock's model failure answered with a 4xx) is a failure of the upstream's. `model`
 * is the model the hop sent, which the caller's 4xx may say is not there (formats/model_missing.ts).
 */
export function statusEnding(error: GatewayError, opts: { model?: string } = {}): HopEnding {
  const how = STATUS_ENDINGS[error.statusSort ?? "failed"];
  if (how !== "rejected") return { how, error };
  const missing = opts.model !== undefined && isModelMissing(error, opts.model);
  return { how: missing ? "model_missing" : "rejected", error };
}

/**
 * What a thrown error says of how the hop ended: the stop we put on its
 * signal, if any; else the caller's input the translation refused, an answer
 * the gateway could not read, or a failed connection (which, after content,
 * is the stream breaking off).
 */
export function thrownEnding(
  err: unknown,
  opts: { signal: AbortSignal; upstream: string; content: boolean },
): HopEnding {
  const reason = stopReason(opts.signal);
  const stop = reason && STOPS[reason.code];
  if (reason && stop) return { how: stop, error: reason };
  const detail = err instanceof Error ? err.message : String(err);
  if (opts.content) {
    const error = new GatewayError(`upstream ${opts.upstream} broke off its stream: ${detail}`, {
      code: "gw.upstream.error",
    });
    return { how: "connection", error };
  }
  if (err instanceof GatewayError) {
    if (err.source === "client") return { how: "caller_input", error: err };
    return { how: err.source === "gateway" ? "gateway_fault" : "bad_response", error: err };
  }
  const error = new GatewayError(`could not reach upstream ${opts.upstream}: ${detail}`, {
    code: "gw.upstream.unreachable",
    cause: err,
  });
  return { how: "connection", error };
}
