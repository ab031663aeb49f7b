import type { UpstreamFrame } from "../formats/format.ts";
import type { IrRequest, IrResponse, IrUsage } from "../formats/ir.ts";
import type { Attempt } from "../live/live_request.ts";
import { isTokenCount } from "../formats/token_counts.ts";
import { estimateInputTokens, estimateTokens, partsChars } from "../formats/token_estimate.ts";

/**
 * What one hop billed, as far as the gateway can tell (docs/observability.md "Token usage").
 * The upstream's own usage is the truth; but a hop stopped part-way (cut, stalled, aborted, its
 * client gone, a lost hedge) has usually been billed for text it never reported usage for. The
 * ledger counts the text a hop received, and at the hop's end fills in what its usage left out.
 */
export class UsageLedger {
  #chars = 0;
  /** Text received since the upstream last reported its output tokens. */
  #unreported = 0;

  /** One streamed frame: its text first, then its usage (a Gemini chunk's usage covers its own text). */
  frame(frame: UpstreamFrame): void {
    const chars = frame.chars ?? (frame.events.length ? frameChars(frame) : 0);
    if (chars) this.text(chars);
    if (frame.usage) this.reported(frame.usage);
  }

  /** `chars` characters of content received. */
  text(chars: number): void {
    this.#chars += chars;
    this.#unreported += chars;
  }

  /** Only a count the hop's row takes (token_counts.ts) covers the text before it. */
  reported(usage: IrUsage): void {
    if (isTokenCount(usage.outputTokens)) this.#unreported = 0;
  }

  /** A whole answer decoded: its parts are the text (the raw JSON around them is not). */
  answer(res: IrResponse): void {
    this.#chars = partsChars(res.content);
    this.#unreported = this.#chars;
    this.reported(res.usage);
  }

  /**
   * Completes the attempt's tokens as the hop ends. Only a hop that received content is billed
   * beyond what it reported: output is estimated when text came after its last reported output
   * (never below what was reported), input when none was reported. A hop whose upstream reported
   * a count out of range is billed its estimated input though it sent no content: it read the
   * prompt. An estimating hop that answered the client carries its estimate onto the request's
   * row.
   */
  settle(attempt: Attempt, opts: { ir: IrRequest; outcome: string }): void {
    const record = attempt.record;
    if (this.#chars === 0 && !attempt.usageRejected) {
      // A lost hedge's upstream answered with headers, so it had read the prompt: that input is
      // billed though it sent no content (docs/liveness.md, "Hedged start").
      if (opts.outcome !== "hedge_lost" || record.headersMs === null) return;
      if (record.inputTokens !== null) return;
      attempt.estimate({ input: estimateInputTokens(opts.ir), answered: false });
      return;
    }
    const output = this.#unreported > 0 ? estimateTokens(this.#chars) : undefined;
    const input = record.inputTokens === null ? estimateInputTokens(opts.ir) : undefined;
    if (output === undefined && input === undefined) return;
    attempt.estimate({ input, output, answered: attempt.contentSeen });
  }
}

/** Characters of text a frame carries (text, reasoning, refusals, tool names and arguments). */
function frameChars(frame: UpstreamFrame): number {
  let chars = 0;
  for (const e of frame.events) {
    if (e.type === "text" || e.type === "reasoning" || e.type === "refusal") chars += e.text.length;
    else if (e.type === "tool_call_args") chars += e.args.length;
    else if (e.type === "tool_call_start") chars += e.name.length;
  }
  return chars;
}
