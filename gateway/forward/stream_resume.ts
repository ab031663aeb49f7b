import type { ClientFormat } from "../formats/format.ts";
import type { IrEvent, IrRequest, IrUsage } from "../formats/ir.ts";
import { cacheWrites, mergeUsage } from "../formats/ir.ts";
import type { AttemptRecord } from "../../db/records.ts";
import { codePoints, ReplayCheck, type Segment } from "./replay_check.ts";

/**
 * Client formats whose streams name items by ids the upstream chose (Responses'
 * `item_id`, the Interactions API's step indexes): a continuation from our encoder
 * would name other ids, and the SDK rejects that. With resume on, their answers
 * are always encoded.
 */
const IDS_FROM_UPSTREAM: ReadonlySet<ClientFormat> = new Set([
  "openai-responses",
  "gemini-interactions",
]);
/**
 * Client formats whose encoder holds a tool call back until it is complete (Gemini sends calls
 * whole): shadowing a passed-through call it would still hold one the client has, and send it
 * again after a replay. With replay possible, their answers are always encoded.
 */
const HOLDS_CALLS: ReadonlySet<ClientFormat> = new Set(["gemini"]);

/**
 * What the client has is held for a resume up to this many UTF-16 code units (a JS string's
 * length, 2 bytes each at most: 32 MiB, what a whole answer may hold, UPSTREAM_CAPS.answerBytes).
 * That is 30 times the longest answer a model writes today (128k output tokens, about 512k
 * characters) and more than a prefill could carry into any context window. An answer past it is
 * not resumed and nothing more of it is held, so an upstream that streams without end no longer
 * grows the request's memory through it (docs/liveness.md "Mid-stream resume").
 */
export const RESUME_HELD_CHARS = 16 * 1024 * 1024;

/** How a candidate continues a broken answer (docs/liveness.md): prefill or replay. */
export type ResumeWay = "prefill" | "replay";
/** A route's `resume_after_content`, when on. */
export type ResumeMode = ResumeWay | "auto";

/** Where a resuming hop picks the answer up. */
export interface ResumePoint {
  /** The text the upstream is sent as the answer's start (a trailing assistant message). */
  prefill: string;
  /** Characters (code points) of text the client already had. */
  offset: number;
}

/** Where a replay takes over: once it has matched this many characters (code points). */
export interface ReplayPoint {
  offset: number;
}

/** The ways a broken answer can be resumed, where each picks it up; null where one cannot. */
export interface ResumePoints {
  prefill: ResumePoint | null;
  replay: ReplayPoint | null;
}

/**
 * What one streamed answer has delivered to the client, for mid-stream resume
 * (docs/liveness.md): its content in the order the client got it, whether a tool call or a
 * finish went out, and its usage per hop. Once a resuming hop starts, its events are rewritten
 * before they reach the same client encoder, so that encoder carries on with
 * the one message it started: no second start, usage summed over the hops,
 * no whitespace the client already had repeated after a prefill, and a replay's tool calls
 * numbered as the client numbers them.
 */
export class StreamResume {
  /** What the client has, as the replay compares it (replay_check.ts); text, for a prefill. */
  #delivered: Segment[] = [];
  /** Code units held in `#delivered`, up to RESUME_HELD_CHARS. */
  #held = 0;
  /** The client got more than RESUME_HELD_CHARS: this answer is no longer resumed. */
  #overflowed = false;
  /** The client's index of each tool call it got, in order. */
  #calls: number[] = [];
  #toolCall = false;
  #finished = false;
  /** Usage of the hops before the current one, summed. */
  #earlier: IrUsage = {};
  /** The current hop's usage as it last reported it (cumulative, like the formats report it). */
  #hop: IrUsage = {};
  #resuming = false;
  /** The prefill left off trailing whitespace the client has: the continuation's leading whitespace is dropped. */
  #trimLead = false;
  /** Whether the current break's prefill left whitespace off. */
  #prefillTrims = false;
  /** A replay that caught up: its tool-call indexes as the client's; null: as they come. */
  #indexOf: Map<number, number> | null = null;
  #nextIndex = 0;

  constructor(
    readonly enabled: boolean,
    readonly opts: {
      client: ClientFormat; /** The route may resume by replay. */
      replays?: boolean;
    },
  ) {}

  /**
   * Resume as the route says, except for a request with provider-run tools or
   * features only a same-format upstream takes: their blocks (a web search's
   * results) have no IR event, so no encoder could follow the stream they are
   * in, and a translated resume could not carry them.
   */
  static for(
    req: { route: { resume_after_content: ResumeMode | null }; ir: IrRequest },
    opts: { client: ClientFormat },
  ): StreamResume {
    const { ir } = req;
    const native = (ir.builtinTools?.length ?? 0) + (ir.nativeOnly?.length ?? 0);
    const mode = req.route.resume_after_content;
    if (mode === null || native > 0) return inert(opts.client);
    return new StreamResume(true, { ...opts, replays: mode !== "prefill" });
  }

  /** Code units of what the client has that are held for a resume (RESUME_HELD_CHARS at most). */
  get held(): number {
    return this.#held;
  }

  /** The client got more than RESUME_HELD_CHARS: the answer is not resumed (`points` is null). */
  get overflowed(): boolean {
    return this.#overflowed;
  }

  /** True from the first resume on. */
  get resuming(): boolean {
    return this.#resuming;
  }

  /**
   * Whether a hop whose format the client takes as is may pass its bytes
   * through. A continuation never does (it is written by the encoder that
   * wrote, or shadowed, the answer's start), nor any hop of a client whose
   * stream a continuation could not join.
   */
  passesThrough(sameFormat: boolean): boolean {
    if (!this.enabled) return sameFormat;
    const { client, replays } = this.opts;
    if (replays && HOLDS_CALLS.has(client)) return false;
    return sameFormat && !this.#resuming && !IDS_FROM_UPSTREAM.has(client);
  }

  /** The answer's usage so far, summed over its hops. */
  get usage(): IrUsage {
    return addUsage(this.#earlier, this.#hop);
  }

  /** One frame's events on their way to the client: rewritten while resuming, and noted. */
  pass(frame: { events: IrEvent[]; usage?: IrUsage }): IrEvent[] {
    const { events } = frame;
    if (!this.enabled) return events;
    // Some formats report usage beside their events (Anthropic's message_start), not as one.
    if (frame.usage) this.#hop = mergeUsage(this.#hop, frame.usage);
    const out: IrEvent[] = [];
    for (const event of events) {
      const sent = this.#rewrite(event);
      if (sent) out.push(sent);
    }
    return out;
  }

  #rewrite(event: IrEvent): IrEvent | null {
    switch (event.type) {
      case "start":
        return this.#resuming ? null : event;
      case "usage":
        this.#hop = mergeUsage(this.#hop, event.usage);
        return this.#resuming ? { type: "usage", usage: this.usage } : event;
      case "text": {
        const text = this.#trimLead ? event.text.trimStart() : event.text;
        if (!text) return null;
        this.#trimLead = false;
        this.#note("text", text);
        return text === event.text ? event : { type: "text", text };
      }
      case "reasoning":
      case "refusal":
        this.#note(event.type, event.text);
        return event;
      case "tool_call_start": {
        this.#toolCall = true;
        const index = this.#clientIndex(event.index);
        if (this.#holds(event.name)) {
          this.#delivered.push({ key: `call:${this.#calls.length}`, text: event.name });
          this.#calls.push(index);
        }
        return index === event.index ? event : { ...event, index };
      }
      case "tool_call_args": {
        this.#toolCall = true;
        const index = this.#clientIndex(event.index);
        this.#note(`args:${this.#calls.lastIndexOf(index)}`, event.args);
        return index === event.index ? event : { ...event, index };
      }
      case "finish":
        this.#finished = true;
        return event;
      default:
        return event;
    }
  }

  /** Adds to the last segment when it is of the same kind. */
  #note(key: string, text: string): void {
    if (!text || !this.#holds(text)) return;
    const last = this.#delivered.at(-1);
    if (last?.key === key) last.text += text;
    else this.#delivered.push({ key, text });
  }

  /**
   * Whether `text` may be held: false once the answer has gone past RESUME_HELD_CHARS, when
   * what was held is let go, since no resume could reproduce the answer without it.
   */
  #holds(text: string): boolean {
    if (this.#overflowed) return false;
    this.#held += text.length;
    if (this.#held <= RESUME_HELD_CHARS) return true;
    this.#overflowed = true;
    this.#delivered = [];
    this.#calls = [];
    this.#held = 0;
    return false;
  }

  #clientIndex(index: number): number {
    const map = this.#indexOf;
    if (!map) return index;
    let mapped = map.get(index);
    if (mapped === undefined) {
      mapped = this.#nextIndex++;
      map.set(index, mapped);
    }
    return mapped;
  }

  /**
   * Where the current hop's break can be picked up, by each way; null when this answer cannot
   * be resumed at all: off, nothing went out, the answer already finished, or it went past
   * RESUME_HELD_CHARS. A prefill needs text and no tool call (its arguments cannot be continued
   * as text); a replay compares all the client has (text, reasoning, refusals, tool calls).
   * Changes nothing.
   */
  points(): ResumePoints | null {
    if (!this.enabled || this.#finished || this.#overflowed || !this.#delivered.length) {
      return null;
    }
    const text = this.#delivered.filter((s) => s.key === "text").map((s) => s.text).join("");
    // Anthropic refuses a prefill ending in whitespace; the client has it, so the continuation's is dropped.
    const prefill = this.#toolCall ? "" : text.trimEnd();
    const all = this.#delivered.reduce((n, s) => n + codePoints(s.text), 0);
    return {
      prefill: prefill ? { prefill, offset: codePoints(text) } : null,
      replay: { offset: all },
    };
  }

  /**
   * The current hop broke and another will resume the answer: starts a new hop's usage.
   * `broken`, the broken hop's row, gives its tokens where its usage never came (estimated,
   * docs/observability.md "Token usage").
   */
  begin(broken?: Pick<AttemptRecord, "tokensEstimated" | "inputTokens" | "outputTokens"> | null) {
    if (!this.enabled) throw new Error("an inert stream view never resumes (it is shared)");
    const billed = broken?.tokensEstimated
      ? {
        ...this.#hop,
        inputTokens: broken.inputTokens ?? this.#hop.inputTokens,
        outputTokens: broken.outputTokens ?? this.#hop.outputTokens,
      }
      : this.#hop;
    this.#earlier = addUsage(this.#earlier, billed);
    this.#hop = {};
    this.#resuming = true;
    const text = this.#delivered.filter((s) => s.key === "text").map((s) => s.text).join("");
    this.#prefillTrims = /\s$/.test(text);
  }

  /** The next hops resume by `way`. */
  use(way: ResumeWay): void {
    this.#trimLead = way === "prefill" && this.#prefillTrims;
    this.#indexOf = null;
  }

  /** A replaying hop's comparison with what the client has now (replay_check.ts). */
  replayCheck(): ReplayCheck {
    return new ReplayCheck(this.#delivered.map((s) => ({ ...s })));
  }

  /**
   * A replay matched all the client has: what follows is relayed, its usage counted from
   * here, its tool calls numbered as the client has them and new ones after them.
   */
  caughtUp(check: ReplayCheck): void {
    this.#hop = {};
    this.#indexOf = new Map();
    for (const [own, n] of check.calls) {
      const index = this.#calls[n];
      if (index !== undefined) this.#indexOf.set(own, index);
    }
    this.#nextIndex = this.#calls.reduce((max, index) => Math.max(max, index + 1), 0);
  }
}

/** The request with the delivered text as the answer's start: a trailing assistant turn. */
export function withPrefill(ir: IrRequest, prefill: string): IrRequest {
  const last = ir.messages.at(-1);
  const part = { type: "text" as const, text: prefill };
  // The client's own prefill stays: the delivered text continued it.
  const messages = last?.role === "assistant"
    ? [...ir.messages.slice(0, -1), { ...last, content: [...last.content, part] }]
    : [...ir.messages, { role: "assistant" as const, content: [part] }];
  return { ...ir, messages };
}

/**
 * The view of a stream whose route does not resume, one per client format: it keeps nothing
 * (`pass` hands events on untouched), so streams share it rather than each holding an empty
 * one (bench/held_heap.ts).
 */
const INERT = new Map<ClientFormat, StreamResume>();

function inert(client: ClientFormat): StreamResume {
  let view = INERT.get(client);
  if (!view) INERT.set(client, view = new StreamResume(false, { client, replays: false }));
  return view;
}

/** Sums usage field by field; a field no hop reported stays unknown. */
export function addUsage(a: IrUsage, b: IrUsage): IrUsage {
  const sum = (x?: number, y?: number) =>
    x === undefined && y === undefined ? undefined : (x ?? 0) + (y ?? 0);
  return {
    inputTokens: sum(a.inputTokens, b.inputTokens),
    outputTokens: sum(a.outputTokens, b.outputTokens),
    cachedTokens: sum(a.cachedTokens, b.cachedTokens),
    reasoningTokens: sum(a.reasoningTokens, b.reasoningTokens),
    ...cacheWrites(sum(a.cacheWriteTokens, b.cacheWriteTokens), {
      oneHour: sum(a.cacheWrite1hTokens, b.cacheWrite1hTokens),
    }),
  };
}
