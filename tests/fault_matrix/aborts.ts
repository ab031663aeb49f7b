/**
 * The abort cells of the fault matrix: an operator's abort of a live request, before any byte
 * reached the client and mid-stream, through every client format and each of its upstream kinds.
 * What each format must say is one row here, the words each coding agent takes as final
 * (docs/design.md "Abort and disconnect"); the format tests read the same errors back through
 * the official SDKs (tests/*_format_test.ts, "operator's stop").
 */
import { FAULT_TEXT } from "./faults.ts";
import { upToFirstText, type Wire } from "./wire.ts";
import type { Script } from "../fake_upstreams/server.ts";

export type AbortMoment = "before_any_byte" | "mid_stream";
export const ABORT_MOMENTS: readonly AbortMoment[] = ["before_any_byte", "mid_stream"];

export interface AbortWords {
  /** The status of the error answer before any byte (the row keeps 499 whatever it is). */
  status: number;
  /** What the error body, or the stream's error event, says. */
  said: RegExp;
  /** What must come before the stream's error event, if anything. */
  streamEnding?: RegExp;
}

/** By client format (tests/fault_matrix/clients.ts `name`). */
export const ABORT_WORDS: Record<string, AbortWords> = {
  chat: { status: 400, said: /"type":"invalid_request_error"[^}]*"code":"gw\.request\.aborted"/ },
  responses: {
    status: 400,
    said:
      /"type":"invalid_request_error"|"code":"invalid_prompt"[^}]*"gateway_code":"gw\.request\.aborted"/,
  },
  anthropic: {
    status: 499,
    said: /"type":"invalid_request_error"[^}]*"details":\{"error_code":"gw\.request\.aborted"/,
    // Claude Code re-sends a turn whose stream failed inside an open block.
    streamEnding: /event: content_block_stop\n[^\n]*\n\nevent: error\n/,
  },
  "gemini-sse": { status: 400, said: /"code":400[^}]*"status":"INVALID_ARGUMENT"/ },
  interactions: {
    status: 400,
    said:
      /"status":"INVALID_ARGUMENT"|"code":"gw\.request\.aborted"[^}]*"status":"INVALID_ARGUMENT"/,
  },
  "gemini-array": { status: 400, said: /"code":400[^}]*"status":"INVALID_ARGUMENT"/ },
};

/** The upstream's answer: nothing at all, or its first text and then nothing, until stopped. */
export function abortScript(wire: Wire, moment: AbortMoment, stream: boolean): Script {
  if (moment === "before_any_byte") return { headerDelay: "never" };
  if (!stream) throw new Error("a whole answer has no middle");
  return {
    headers: { "content-type": wire.streamType },
    body: [...upToFirstText(wire, FAULT_TEXT).map((send) => ({ send })), { hang: true }],
  };
}
