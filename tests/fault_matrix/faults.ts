/**
 * The faults an upstream can commit, as a table. Each says what the faulty
 * upstream sends, streamed and whole, and what docs/design.md "Failover before content" makes of it: a failure
 * before content (fail over), a failure after content reached the client (the
 * stream ends with an error event, nothing else is tried), the caller's own
 * error (returned, no failover) or no fault at all.
 */
import type { UpstreamKind } from "../../gateway/formats/format.ts";
import type { GatewayCode } from "../../gateway/runtime/gateway_error.ts";
import type { Script, Step } from "../fake_upstreams/server.ts";
import { asText, type Chunk, upToFirstText, type Wire } from "./wire.ts";
import { UPSTREAM_CAPS } from "../../gateway/formats/upstream_caps.ts";
import type { How } from "../../gateway/forward/verdict.ts";

export type Effect = "fail_before" | "fail_after" | "reject" | "ok";

/** What the faulty upstream does in one mode, and what the gateway must make of it. */
export interface Behaviour {
  /** A script for the fake upstream, or a connection-level fault. */
  serve: "refused" | "reset_before_headers" | ((wire: Wire, text: string[]) => Script);
  /** How the faulty hop ends, in the gateway's words (gateway/forward/verdict.ts). */
  how: How;
  /** What docs/design.md says follows; gateway/forward/verdict_test.ts holds the verdict table to it. */
  effect: Effect;
  /** Retried once on the same candidate before failing over. */
  retried?: boolean;
  /** Fails by the idle timer, so after the opening hold. */
  slow?: boolean;
  /** The gateway code the request ends with when this failure is the last word. */
  code?: GatewayCode;
  /** The status a client gets when this failure exhausts the route before headers. */
  status?: number;
}

export interface Fault {
  name: string;
  /** What the faulty upstream is given to say; FAULT_TEXT unless the fault is about the text. */
  text?: string[];
  stream?: Behaviour;
  whole?: Behaviour;
  /** Upstream kinds the fault applies to, when not all. */
  kinds?: UpstreamKind[];
}

/** The faulty upstream's answer text; the good upstream says something else. */
export const FAULT_TEXT = ["Fault ", "text"];
export const GOOD_TEXT = ["Good ", "answer"];

const steps = (chunks: Chunk[]): Step[] => chunks.map((send) => ({ send }));
const sse = (wire: Wire, body: Step[]): Script => ({
  headers: { "content-type": wire.streamType },
  body,
});
const whole = (body: Step[]): Script => ({ headers: { "content-type": "application/json" }, body });
const halfOf = (chunk: Chunk): string => {
  const text = asText(chunk);
  return text.slice(0, Math.floor(text.length / 2));
};
/** The chunks up to the answer's first text, then what `rest` adds. */
const started = (rest: Step[]) => (wire: Wire, text: string[]) =>
  sse(wire, [...steps(upToFirstText(wire, text)), ...rest]);

const statusFault = (
  status: number,
  opts: Partial<Behaviour> & { code: GatewayCode; how: How; headers?: Record<string, string> },
): Fault => {
  const { headers = {}, ...more } = opts;
  const behaviour: Behaviour = {
    serve: (wire) => {
      const script = wire.error(status, `upstream says ${status}`);
      return { ...script, headers: { ...script.headers, ...headers } };
    },
    effect: "fail_before",
    retried: true,
    ...more,
  };
  return { name: `http_${status}`, stream: behaviour, whole: behaviour };
};

const idle = {
  how: "idle_timeout",
  effect: "fail_before",
  slow: true,
  code: "gw.upstream.idle_timeout",
} as const;
const broken = {
  how: "connection",
  effect: "fail_before",
  retried: true,
  code: "gw.upstream.unreachable",
} as const;
const bad = { effect: "fail_before", code: "gw.upstream.bad_response" } as const;
/** A whole answer the gateway cannot read: the upstream's 502 when it is the last word, not a timeout. */
const unreadable = { ...bad, how: "bad_response", status: 502 } as const;

/** A Bedrock event-stream prelude announcing a message one byte over the event cap. */
const OVERSIZED_PRELUDE = (() => {
  const bytes = new Uint8Array(12);
  new DataView(bytes.buffer).setUint32(0, UPSTREAM_CAPS.eventBytes + 1);
  return bytes;
})();

const endlessErrorEffect = {
  how: "overloaded",
  effect: "fail_before",
  retried: true,
  code: "gw.upstream.error",
} as const;

export const FAULTS: Fault[] = [
  ...[500, 502, 503, 504].map((status) =>
    statusFault(status, { how: "overloaded", code: "gw.upstream.error" })
  ),
  statusFault(429, {
    how: "rate_limited",
    code: "gw.upstream.rate_limited",
    status: 429,
    headers: { "retry-after": "1" },
  }),
  statusFault(400, {
    how: "rejected",
    code: "gw.upstream.rejected",
    effect: "reject",
    retried: false,
    status: 400,
  }),
  statusFault(401, { how: "refused", code: "gw.upstream.credentials", retried: false }),
  {
    name: "connection_refused",
    stream: { serve: "refused", ...broken },
    whole: { serve: "refused", ...broken },
  },
  {
    name: "reset_before_headers",
    stream: { serve: "reset_before_headers", ...broken },
    whole: { serve: "reset_before_headers", ...broken },
  },
  {
    name: "reset_after_headers",
    stream: {
      serve: (wire, text) =>
        sse(wire, [...steps(wire.stream(text).slice(0, wire.opening)), { reset: true }]),
      ...broken,
    },
    whole: { serve: () => whole([{ reset: true }]), ...broken },
  },
  {
    name: "headers_then_silence",
    stream: { serve: (wire) => sse(wire, [{ hang: true }]), ...idle },
    whole: { serve: () => whole([{ hang: true }]), ...idle },
  },
  {
    name: "headers_never",
    stream: { serve: () => ({ headerDelay: "never" }), ...idle },
    whole: { serve: () => ({ headerDelay: "never" }), ...idle },
  },
  {
    name: "pings_only",
    stream: {
      serve: (wire, text) =>
        sse(wire, [
          ...steps(wire.stream(text).slice(0, wire.opening)),
          ...Array.from({ length: 40 }, (): Step[] => [{ send: wire.ping }, { wait: 50 }]).flat(),
          { hang: true },
        ]),
      ...idle,
    },
  },
  {
    name: "whitespace_only",
    stream: { serve: (wire) => sse(wire, [{ send: "  \n\n  \n" }]), how: "unfinished", ...bad },
    whole: { serve: () => whole([{ send: "  \n\n  \n" }]), ...unreadable },
  },
  {
    name: "content_then_silence",
    stream: {
      serve: started([{ hang: true }]),
      how: "idle_timeout",
      effect: "fail_after",
      slow: true,
      code: "gw.upstream.idle_timeout_mid_stream",
    },
    whole: {
      serve: (wire, text) => whole([{ send: halfOf(wire.whole(text)) }, { hang: true }]),
      ...idle,
    },
  },
  {
    name: "content_then_reset",
    stream: {
      // The pause lets the content reach the gateway first: bytes that arrive together with the
      // reset are lost with it (a stream's error drops what is queued), and then no content
      // reached the client at all, which is another cell.
      serve: started([{ wait: 100 }, { reset: true }]),
      how: "connection",
      effect: "fail_after",
      code: "gw.upstream.error",
    },
    whole: {
      serve: (wire, text) => whole([{ send: halfOf(wire.whole(text)) }, { reset: true }]),
      ...broken,
    },
  },
  {
    name: "error_event_before_content",
    stream: {
      serve: (wire, text) =>
        sse(wire, [...steps(wire.stream(text).slice(0, wire.opening)), { send: wire.errorEvent }]),
      how: "stream_error",
      effect: "fail_before",
    },
  },
  {
    name: "error_event_after_content",
    stream: {
      serve: (wire) => started([{ send: wire.errorEvent }])(wire, FAULT_TEXT),
      how: "stream_error",
      effect: "fail_after",
    },
  },
  {
    name: "error_event_only",
    stream: {
      serve: (wire) => sse(wire, [{ send: wire.errorEvent }]),
      how: "stream_error",
      effect: "fail_before",
    },
  },
  {
    name: "garbage_bytes",
    stream: {
      serve: (wire) => sse(wire, [{ send: "<html>\n\ndata: <b>oops</b>\n\n" }]),
      how: "stream_error",
      ...bad,
    },
    whole: {
      serve: () => whole([{ send: "<html><b>oops</b></html>" }]),
      ...unreadable,
    },
  },
  {
    name: "truncated_frame",
    stream: {
      serve: (wire, text) => {
        const chunks = wire.stream(text);
        const cut = upToFirstText(wire, text).length;
        return sse(wire, [...steps(chunks.slice(0, cut)), { send: halfOf(chunks[cut]!) }]);
      },
      how: "stream_error",
      effect: "fail_after",
      code: "gw.upstream.bad_response",
    },
    whole: {
      serve: (wire, text) => whole([{ send: halfOf(wire.whole(text)) }]),
      ...unreadable,
    },
  },
  {
    name: "close_without_finish",
    stream: {
      serve: started([]),
      how: "unfinished",
      effect: "fail_after",
      code: "gw.upstream.incomplete",
    },
  },
  {
    name: "one_event_over_1mib",
    // The first piece alone is over 1 MiB: content is never held, so no hold limit applies.
    text: [FAULT_TEXT[0] + "x".repeat(1024 * 1024 + 100), ...FAULT_TEXT.slice(1)],
    stream: {
      serve: (wire, text) => sse(wire, steps(wire.stream(text))),
      how: "answered",
      effect: "ok",
    },
    whole: {
      serve: (wire, text) => whole([{ send: wire.whole(text) }]),
      how: "answered",
      effect: "ok",
    },
  },
  {
    name: "line_never_ends",
    kinds: ["openai-chat", "openai-responses", "anthropic", "gemini", "gemini-interactions"],
    stream: {
      serve: (wire) =>
        sse(wire, [
          { send: 'data: {"x":"' },
          ...Array.from({ length: 20 }, () => ({ send: "x".repeat(64 * 1024) })),
          { hang: true },
        ]),
      ...idle,
    },
  },
  {
    name: "oversized_message",
    // Cheap where the size comes first: a Bedrock message's prelude announces its length, so
    // one over the cap is refused unread. SSE events over theirs (16 MiB, too big to send in
    // every cell) are tested in tests/virtual/hostile_upstream_test.ts.
    kinds: ["bedrock"],
    stream: {
      serve: (wire) => sse(wire, [{ send: OVERSIZED_PRELUDE }, { hang: true }]),
      how: "stream_error",
      effect: "fail_before",
      code: "gw.upstream.oversized",
    },
  },
  {
    name: "oversized_message_after_content",
    kinds: ["bedrock"],
    stream: {
      serve: started([{ send: OVERSIZED_PRELUDE }, { hang: true }]),
      how: "stream_error",
      effect: "fail_after",
      code: "gw.upstream.oversized",
    },
  },
  {
    name: "endless_error_body",
    // Only the error body's first 64 KiB are read: one that never ends is still a 500.
    stream: { serve: () => endlessError(500), ...endlessErrorEffect },
    whole: { serve: () => endlessError(500), ...endlessErrorEffect },
  },
  {
    name: "non_json_error_body",
    stream: {
      serve: () => htmlError(502),
      how: "overloaded",
      effect: "fail_before",
      retried: true,
      code: "gw.upstream.error",
    },
    whole: {
      serve: () => htmlError(502),
      how: "overloaded",
      effect: "fail_before",
      retried: true,
      code: "gw.upstream.error",
    },
  },
  {
    name: "no_end_marker",
    kinds: ["openai-chat", "anthropic", "gemini-interactions"],
    stream: {
      serve: (wire, text) => sse(wire, steps(wire.stream(text).slice(0, -1))),
      how: "answered",
      effect: "ok",
    },
  },
];

function endlessError(status: number): Script {
  const start = '{"message":"endless error ';
  return {
    status,
    headers: { "content-type": "application/json" },
    body: [{ send: start + "e".repeat(UPSTREAM_CAPS.errorBodyBytes) }, { hang: true }],
  };
}

function htmlError(status: number): Script {
  return {
    status,
    headers: { "content-type": "text/html" },
    body: [{ send: "<html><body><h1>502 Bad Gateway</h1></body></html>" }],
  };
}
