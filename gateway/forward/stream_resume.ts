import type { ClientFormat } from "../formats/format.ts";
import type { IrEvent, IrRequest, IrUsage } from "../formats/ir.ts";
import { cacheWrites, mergeUsage } from "../formats/ir.ts";
import type { AttemptRecord } from "../../db/records.ts";

/**
 * Client formats whose streams name items by ids the upstream chose (Responses'
 * `item_id`): a continuation from our encoder would name other ids, and the
 * SDK rejects that. With resume on, their answers are always encoded.
 */
const IDS_FROM_UPSTREAM: ReadonlySet<ClientFormat> = new Set(["openai-responses"]);

/** Where a resuming hop picks the answer up. */
export interface ResumePoint {
  /** The text the upstream is sent as the answer's start (a trailing assistant message). */
  prefill: string;
  /** Characters (code points) of text the client already had. */
  offset: number;
}

/**
 * What one streamed answer has delivered to the client, for mid-stream resume
 * (docs/liveness.md): its text, whether a tool call or a finish went out, and
 * its usage per hop. Once a resuming hop starts, its events are rewritten
 * before they reach the same client encoder, so that encoder carries on with
 * the one message it started: no second start, usage summed over the hops,
 * and no whitespace the client already had repeated.
 */
export class StreamResume {
  #text = "";
  #toolCall = false;
  #finished = false;
  /** Usage of the hops before the current one, summed. */
  #earlier: IrUsage = {};
  /** The current hop's usage as it last reported it (cumulative, like the formats report it). */
  #hop: IrUsage = {};
  #resuming = false;
  /** The prefill left off trailing whitespace the client has: the continuation's leading whitespace is dropped. */
  #trimLead = false;

  constructor(readonly enabled: boolean, readonly opts: { client: ClientFormat }) {}

  /**
   * Resume as the route says, except for a request with provider-run tools or
   * features only a same-format upstream takes: their blocks (a web search's
   * results) have no IR event, so no encoder could follow the stream they are
   * in, and a translated resume could not carry them.
   */
  static for(
    req: { route: { resume_after_content: "prefill" | null }; ir: IrRequest },
    opts: { client: ClientFormat },
  ): StreamResume {
    const { ir } = req;
    const native = (ir.builtinTools?.length ?? 0) + (ir.nativeOnly?.length ?? 0);
    return new StreamResume(req.route.resume_after_content === "prefill" && native === 0, opts);
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
    return sameFormat && !this.#resuming && !IDS_FROM_UPSTREAM.has(this.opts.client);
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
        this.#text += text;
        return text === event.text ? event : { type: "text", text };
      }
      case "tool_call_start":
      case "tool_call_args":
        this.#toolCall = true;
        return event;
      case "finish":
        this.#finished = true;
        return event;
      default:
        return event;
    }
  }

  /**
   * The point to resume from after the current hop broke, or null when this
   * answer cannot be resumed: off, no text went out, a tool call went out (its
   * arguments cannot be continued as text), or the answer already finished.
   * Starts a new hop's usage. `broken`, the broken hop's row, gives its tokens where
   * its usage never came (estimated, docs/observability.md "Token usage").
   */
  begin(broken?: Pick<AttemptRecord, "tokensEstimated" | "inputTokens" | "outputTokens"> | null):
    | ResumePoint
    | null {
    if (!this.enabled || this.#toolCall || this.#finished) return null;
    // Anthropic refuses a prefill ending in whitespace; the client has it, so the continuation's is dropped.
    const prefill = this.#text.trimEnd();
    if (!prefill) return null;
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
    this.#trimLead = prefill.length < this.#text.length;
    return { prefill, offset: [...this.#text].length };
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
