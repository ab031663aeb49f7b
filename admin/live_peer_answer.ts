import { z } from "zod";
import { jsonShape } from "../gateway/formats/json_guard.ts";
import type { LivePart } from "./api_types.ts";
import { compareKeys, keyOf } from "./live_part.ts";
import type { LiveQuery } from "./live_query.ts";

/**
 * The most bytes a peer's share of a live page may take. A full page of 100 rows is about 40 KB
 * of JSON; this leaves room for long ids and still bounds what a broken or hostile peer can make
 * this instance read and parse on every tick of every open tab (docs/scaling.md).
 */
export const LIVE_PEER_ANSWER_MAX_BYTES = 256 * 1024;
/** A share nests four levels deep (part, rows, row; states); anything deeper is not one. */
const MAX_DEPTH = 4;
/**
 * A row is 17 fields: 35 values as `jsonShape` counts them (each colon and comma, and its brace);
 * the counts around the rows take about 30.
 */
const VALUES_PER_ROW = 40;
const VALUES_AROUND_ROWS = 100;
const COUNT_MAX = 1_000_000_000;

const text = (max: number) => z.string().max(max);
const count = z.number().int().min(0).max(COUNT_MAX);
/** Epoch milliseconds, and durations: finite, not negative, and short of year 5000. */
const ms = z.number().finite().min(0).max(1e14);
const state = z.enum([
  "waiting_for_slot",
  "waiting_for_headers",
  "holding",
  "streaming",
  "finishing",
]);

const RowSchema = z.object({
  id: text(512).min(1),
  instance: text(64),
  sessionId: text(512).nullable(),
  keyId: text(256).nullable(),
  clientFormat: text(64),
  route: text(256).nullable(),
  stream: z.boolean(),
  upstream: text(256).nullable(),
  hop: z.number().int().min(0).max(10_000),
  state,
  startedAt: ms,
  elapsedMs: ms,
  idleMs: ms.nullable(),
  firstContentMs: ms.nullable(),
  inputTokens: count.nullable(),
  outputTokens: count.nullable(),
  aborting: z.boolean(),
});

const PartSchema = z.object({
  instance: text(64),
  at: ms,
  rows: z.array(RowSchema),
  running: count,
  matching: count,
  skipped: count,
  states: z.partialRecord(state, count),
});

export type PeerAnswer = { ok: true; part: LivePart } | { ok: false; why: string };

/**
 * A peer's answer text read as its share of the page, or why it is not one. Checked like any
 * input from outside: its shape before it is parsed, then every field; its rows are at most the
 * page size, after the cursor, and named after the peer asked (whatever they say), and its
 * counts agree with each other.
 */
export function peerAnswer(
  body: string,
  opts: { query: LiveQuery; instance: string },
): PeerAnswer {
  const { query } = opts;
  const shape = jsonShape(body, {
    depth: MAX_DEPTH,
    values: query.limit * VALUES_PER_ROW + VALUES_AROUND_ROWS,
  });
  if (shape.over) return { ok: false, why: `JSON over its ${shape.over.limit} bound` };
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return { ok: false, why: "not JSON" };
  }
  const parsed = PartSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, why: `${issue?.path.join(".") || "answer"}: ${issue?.message}` };
  }
  const part = parsed.data;
  if (part.instance !== opts.instance) return { ok: false, why: "answered for another instance" };
  if (part.rows.length > query.limit) return { ok: false, why: "more rows than the page holds" };
  if (part.matching > part.running || part.skipped + part.rows.length > part.matching) {
    return { ok: false, why: "counts that disagree" };
  }
  const rows = part.rows.map((row) => ({ ...row, instance: opts.instance }));
  const after = query.after;
  if (
    after &&
    rows.some((row) => compareKeys(keyOf(row, { sort: query.sort, at: part.at }), after) <= 0)
  ) {
    return { ok: false, why: "rows before the cursor" };
  }
  return { ok: true, part: { ...part, rows } };
}
