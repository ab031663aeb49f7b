import type { IrEvent, IrUsage } from "../formats/ir.ts";
import { mergeUsage } from "../formats/ir.ts";

/**
 * One run of content the client has, of one kind: text, reasoning, a refusal, the n-th tool
 * call's name (`call:n`, matched whole) or its arguments (`args:n`). Runs of a kind follow one
 * another in the order the client got them; how the upstream cut them into events does not count.
 */
export interface Segment {
  key: string;
  text: string;
}

/** How far a replay has come: still matching, parted from what the client has, or caught up. */
export type ReplayStep =
  | { state: "matching" }
  | { state: "diverged"; at: number; of: number; why: string }
  /** `rest`: what the replay sent beyond what the client has, to be relayed. */
  | { state: "caught_up"; rest: IrEvent[] };

const MATCHING: ReplayStep = Object.freeze({ state: "matching" });

/** Code points: the unit of `resume_offset` (docs/liveness.md). */
export function codePoints(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/**
 * Compares a replaying hop's answer with what the client already has (docs/liveness.md,
 * "Replay"), event by event, without keeping the replay's text: exact, the same code points in
 * the same order within each segment and the same segments in the same order, with no
 * normalisation (Unicode forms, whitespace and case all count). Tool calls are compared by name
 * and by their arguments' JSON text, never by id (a new generation names its calls anew). A
 * replay that finishes, or starts another kind of content, before matching all of it has diverged.
 */
export class ReplayCheck {
  /** The segment being matched, and how far into it. */
  #seg = 0;
  #at = 0;
  /** Code units of the segment the replay still shared where it parted. */
  #shared = 0;
  /** Grows with every character and segment matched: how far the replay has come. */
  #progress = 0;
  /** The replay's tool calls by its own index: their order among its calls. */
  readonly calls = new Map<number, number>();
  /** The replay's usage while it is held (it is billed on its own row: usage_ledger.ts). */
  usage: IrUsage = {};

  constructor(readonly delivered: readonly Segment[]) {}

  get caughtUp(): boolean {
    return this.#seg >= this.delivered.length;
  }

  /** A count that grows whenever the replay matches more of what the client has. */
  get progress(): number {
    return this.#progress;
  }

  absorb(usage: IrUsage): void {
    this.usage = mergeUsage(this.usage, usage);
  }

  /** One frame's events. */
  push(events: readonly IrEvent[]): ReplayStep {
    for (let i = 0; i < events.length; i++) {
      const event = events[i]!;
      if (event.type === "usage") {
        this.absorb(event.usage);
        continue;
      }
      if (event.type === "finish") return this.#diverged({ why: "it finished first" });
      const unit = this.#unit(event);
      if (!unit) continue;
      const tail = unit.whole ? this.#matchWhole(unit) : this.#match(unit);
      if (tail === null) return this.#diverged(unit);
      if (!this.caughtUp) continue;
      const more = events.slice(i + 1);
      return { state: "caught_up", rest: tail ? [withText(event, tail), ...more] : more };
    }
    return MATCHING;
  }

  #unit(event: IrEvent): { key: string; text: string; whole?: true } | null {
    switch (event.type) {
      case "text":
      case "reasoning":
      case "refusal":
        return { key: event.type, text: event.text };
      case "tool_call_start": {
        const n = this.calls.size;
        this.calls.set(event.index, n);
        return { key: `call:${n}`, text: event.name, whole: true };
      }
      case "tool_call_args":
        return { key: `args:${this.calls.get(event.index) ?? "?"}`, text: event.args };
      default:
        return null;
    }
  }

  /** Matches a run of text; answers what lies beyond the client's, or null when it differs. */
  #match(unit: { key: string; text: string }): string | null {
    let rest = unit.text;
    while (rest) {
      const seg = this.delivered[this.#seg];
      if (!seg) return rest;
      if (seg.key !== unit.key) return null;
      const want = seg.text.slice(this.#at, this.#at + rest.length);
      if (!rest.startsWith(want)) {
        this.#shared = sharedLength(rest, want);
        return null;
      }
      this.#at += want.length;
      this.#progress += want.length;
      rest = rest.slice(want.length);
      if (this.#at === seg.text.length) this.#next();
    }
    return "";
  }

  #matchWhole(unit: { key: string; text: string }): string | null {
    const seg = this.delivered[this.#seg];
    if (!seg || seg.key !== unit.key || this.#at !== 0 || seg.text !== unit.text) return null;
    this.#next();
    return "";
  }

  #next(): void {
    this.#seg++;
    this.#at = 0;
    this.#progress++;
  }

  /** Where it parted, in code points of what the client has; never the text itself (it is the answer's). */
  #diverged(unit: { key?: string; why?: string }): ReplayStep {
    const before = this.delivered.slice(0, this.#seg);
    const at = before.reduce((n, s) => n + codePoints(s.text), 0) +
      codePoints(this.delivered[this.#seg]?.text.slice(0, this.#at + this.#shared) ?? "");
    const of = this.delivered.reduce((n, s) => n + codePoints(s.text), 0);
    const has = kindOf(this.delivered[this.#seg]?.key);
    const got = kindOf(unit.key);
    const why = unit.why ??
      (has === got ? `different ${got}` : `${got} where the client has ${has}`);
    return { state: "diverged", at, of, why };
  }
}

function sharedLength(a: string, b: string): number {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}

function kindOf(key: string | undefined): string {
  if (key === undefined) return "nothing more";
  if (key.startsWith("call:")) return "tool call";
  if (key.startsWith("args:")) return "tool-call arguments";
  return key;
}

/** The part of a text-like event past what the client has. */
function withText(event: IrEvent, text: string): IrEvent {
  switch (event.type) {
    case "text":
    case "reasoning":
    case "refusal":
      return { type: event.type, text };
    case "tool_call_args":
      return { ...event, args: text };
    default:
      return event;
  }
}
