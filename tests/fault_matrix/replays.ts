/**
 * The replay rows of the fault matrix (docs/liveness.md, "Replay"). In every row the route's
 * first upstream delivers the start of its answer and its connection resets; the route resumes
 * by replay, so the second upstream is sent the original request and what it answers is held
 * and compared with what the client has. Each row says what the replaying upstream does and how
 * its hop ends in the gateway's words; what follows (the client's bytes, the rows, cooldown) is
 * derived from the verdict table, as for the other faults.
 */
import type { UpstreamKind } from "../../gateway/formats/format.ts";
import type { How } from "../../gateway/forward/verdict.ts";
import type { Script, Step } from "../fake_upstreams/server.ts";
import { asText, type Chunk, type ToolCall, type Wire } from "./wire.ts";
import { FAULT_TEXT, GOOD_TEXT } from "./faults.ts";

/** An answer: its text, then a tool call if it has one. */
export interface Answer {
  text: string[];
  toolCall?: ToolCall;
}

export interface ReplayRow {
  name: string;
  /** The first upstream's answer. */
  first: Answer;
  /** It sends its chunks up to the first that carries this, then its connection resets. */
  cutAfter: string;
  /** What the replaying upstream sends. */
  replay: (wire: Wire) => Script;
  /** How the replaying hop ends (gateway/forward/verdict.ts). */
  how: How;
  /** The code on the replaying hop's row, when it failed. */
  code?: string;
  /** What the client has in the end if the replay continues the answer. */
  whole: { text: string; calls: string[] };
  /** `resume_offset`: the characters the replay had to match, by the first upstream's kind. */
  offset: (kind: UpstreamKind) => number;
}

const SSE = (wire: Wire, body: Step[]): Script => ({
  headers: { "content-type": wire.streamType },
  body,
});
const sends = (chunks: Chunk[]): Step[] => chunks.map((send) => ({ send }));
const answers = (answer: Answer) => (wire: Wire) =>
  SSE(wire, sends(wire.stream(answer.text, answer.toolCall)));

const CALL: ToolCall = { id: "call_first", name: "lookup", argsPieces: ['{"city":', '"Paris"}'] };
const WHOLE_CALL = `lookup{"city":"Paris"}`;
const textOffset = () => FAULT_TEXT[0]!.length;

/**
 * The first upstream: its answer's chunks up to the one carrying `cutAfter` (its finish taken
 * out: Gemini's last content chunk carries it, and a finished answer is not resumed), a pause
 * so that they reach the gateway before the reset does, then the reset.
 */
export function firstOf(row: ReplayRow, wire: Wire): Script {
  const chunks = wire.stream(row.first.text, row.first.toolCall);
  const at = chunks.findIndex((c) => asText(c).includes(row.cutAfter));
  if (at < 0) throw new Error(`${row.name}: no chunk carries ${row.cutAfter}`);
  const sent = chunks.slice(0, at + 1).map((c) =>
    typeof c === "string" ? c.replace(/,?"finishReason":"[A-Z_]+"/, "") : c
  );
  return SSE(wire, [...sends(sent), { wait: 100 }, { reset: true }]);
}

export const REPLAY_ROWS: ReplayRow[] = [
  {
    name: "replay_match",
    first: { text: FAULT_TEXT },
    cutAfter: FAULT_TEXT[0]!,
    // Cut otherwise than the first answer: only the characters count.
    replay: answers({ text: ["Fa", "ult te", "xt"] }),
    how: "answered",
    whole: { text: FAULT_TEXT.join(""), calls: [] },
    offset: textOffset,
  },
  {
    name: "replay_diverges_early",
    first: { text: FAULT_TEXT },
    cutAfter: FAULT_TEXT[0]!,
    replay: answers({ text: GOOD_TEXT }),
    how: "replay_diverged",
    code: "gw.upstream.replay_diverged",
    whole: { text: FAULT_TEXT.join(""), calls: [] },
    offset: textOffset,
  },
  {
    name: "replay_diverges_late",
    first: { text: FAULT_TEXT },
    cutAfter: FAULT_TEXT[0]!,
    // "Fault" matches; the last character the client has, a space, does not.
    replay: answers({ text: ["Fault", "!", "text"] }),
    how: "replay_diverged",
    code: "gw.upstream.replay_diverged",
    whole: { text: FAULT_TEXT.join(""), calls: [] },
    offset: textOffset,
  },
  {
    name: "replay_tool_call",
    first: { text: [FAULT_TEXT[0]!], toolCall: CALL },
    // Through the call's first arguments piece (Gemini sends a call whole, in one chunk).
    cutAfter: "city",
    // A new generation names its call anew and cuts its arguments otherwise.
    replay: answers({
      text: [FAULT_TEXT[0]!],
      toolCall: { id: "call_replay", name: "lookup", argsPieces: ['{"ci', 'ty":"Paris"}'] },
    }),
    how: "answered",
    whole: { text: FAULT_TEXT[0]!, calls: [WHOLE_CALL] },
    offset: (kind) =>
      FAULT_TEXT[0]!.length + CALL.name.length +
      (kind === "gemini" ? CALL.argsPieces.join("") : CALL.argsPieces[0]!).length,
  },
  {
    name: "replay_silent",
    first: { text: FAULT_TEXT },
    cutAfter: FAULT_TEXT[0]!,
    replay: (wire) =>
      SSE(wire, [...sends(wire.stream(FAULT_TEXT).slice(0, wire.opening)), {
        hang: true,
      }]),
    how: "idle_timeout",
    code: "gw.upstream.idle_timeout",
    whole: { text: FAULT_TEXT.join(""), calls: [] },
    offset: textOffset,
  },
  {
    name: "replay_refuses",
    first: { text: FAULT_TEXT },
    cutAfter: FAULT_TEXT[0]!,
    replay: (wire) => wire.error(400, "This request is not allowed."),
    how: "rejected",
    code: "gw.upstream.rejected",
    whole: { text: FAULT_TEXT.join(""), calls: [] },
    offset: textOffset,
  },
];
