import type { FailureSource } from "./wire_kinds.ts";
import type { UpstreamKind } from "./wire_kinds.ts";
import { ERROR_CODES, type GatewayCode } from "./error_codes.ts";

export type { FailureSource, GatewayCode };

/**
 * What an upstream's error status says, sorted once by gateway/formats/upstream_status.ts and
 * kept on the error it became, so the verdict table reads the sort and never the status
 * (`STATUS_ENDINGS` in gateway/forward/verdict.ts).
 */
export type StatusSort =
  | "credentials"
  | "upstream_timeout"
  | "rate_limit"
  | "overloaded"
  | "callers"
  | "failed";

/** Carries the gateway's code on every error response, next to `x-pulsegate-error` (docs/design.md "Client API"). */
export const ERROR_CODE_HEADER = "x-pulsegate-error-code";

/** An upstream's error answer as it came, for a client of the same format (docs/design.md "Client API"). */
export interface UpstreamErrorAnswer {
  text: string;
  contentType: string;
}

export interface GatewayErrorInit {
  code: GatewayCode;
  /** Whose fault; the code's default (gateway/runtime/error_codes.ts) when omitted. */
  source?: FailureSource;
  /** The status to answer; the code's default when omitted. */
  status?: number;
  /** Upstream ids in the order they were tried, for "tried: a → b". */
  tried?: string[];
  /** The candidates passed over as unable to take the request, and why ("skipped: c: ..."). */
  skipped?: string;
  /** Field name for a client error, rendered as OpenAI's `param`. */
  param?: string;
  retryAfterSecs?: number;
  /**
   * The upstream's own error words, kept so a passed-on 4xx keeps its meaning:
   * OpenAI `type` and `code`, Anthropic `type`, Gemini `status`, Bedrock
   * exception name. `upstreamKind` says whose vocabulary they are in.
   */
  upstreamType?: string;
  upstreamCode?: string;
  upstreamKind?: UpstreamKind;
  upstreamAnswer?: UpstreamErrorAnswer;
  /** How the upstream's error status was sorted, when the error was made from one. */
  statusSort?: StatusSort;
  /**
   * What history records instead of the client's message, where the row must say more than the
   * caller may learn (docs/security.md "Routes a key may not use").
   */
  recorded?: string;
  cause?: unknown;
}

/**
 * The single error type of the request path. It knows whose fault it is and
 * which status it deserves; each client format renders it in one place.
 */
export class GatewayError extends Error {
  readonly code: GatewayCode;
  readonly source: FailureSource;
  readonly status: number;
  readonly tried: string[];
  readonly skipped?: string;
  readonly param?: string;
  readonly retryAfterSecs?: number;
  readonly upstreamType?: string;
  readonly upstreamCode?: string;
  readonly upstreamKind?: UpstreamKind;
  readonly upstreamAnswer?: UpstreamErrorAnswer;
  readonly statusSort?: StatusSort;
  readonly recorded?: string;

  constructor(message: string, init: GatewayErrorInit) {
    super(message, { cause: init.cause });
    this.name = "GatewayError";
    this.code = init.code;
    this.source = init.source ?? ERROR_CODES[init.code].source;
    this.status = init.status ?? ERROR_CODES[init.code].status;
    this.tried = init.tried ?? [];
    this.skipped = init.skipped || undefined;
    this.param = init.param;
    this.retryAfterSecs = init.retryAfterSecs;
    this.upstreamType = init.upstreamType;
    this.upstreamCode = init.upstreamCode;
    this.upstreamKind = init.upstreamKind;
    this.upstreamAnswer = init.upstreamAnswer;
    this.statusSort = init.statusSort;
    this.recorded = init.recorded;
  }

  /** The message a client reads: what happened, plus the chain of candidates. */
  get publicMessage(): string {
    const chain = [
      ...(this.tried.length ? [`tried: ${this.tried.join(" → ")}`] : []),
      ...(this.skipped ? [this.skipped] : []),
    ];
    return chain.length ? `${this.message} (${chain.join("; ")})` : this.message;
  }

  /** The message history records: the client's, unless the row must say more. */
  get recordedMessage(): string {
    return this.recorded ?? this.publicMessage;
  }

  withTried(tried: string[]): GatewayError {
    return this.with({ tried });
  }

  /** The same error with some of its fields changed. */
  with(changes: Partial<GatewayErrorInit>): GatewayError {
    return new GatewayError(this.message, { ...this.init(), ...changes });
  }

  private init(): GatewayErrorInit {
    return {
      code: this.code,
      source: this.source,
      status: this.status,
      tried: this.tried,
      skipped: this.skipped,
      param: this.param,
      retryAfterSecs: this.retryAfterSecs,
      upstreamType: this.upstreamType,
      upstreamCode: this.upstreamCode,
      upstreamKind: this.upstreamKind,
      upstreamAnswer: this.upstreamAnswer,
      statusSort: this.statusSort,
      recorded: this.recorded,
      cause: this.cause,
    };
  }

  static from(err: unknown): GatewayError {
    if (err instanceof GatewayError) return err;
    const message = err instanceof Error ? err.message : String(err);
    return new GatewayError(`internal gateway error: ${message}`, {
      code: "gw.gateway.internal",
      cause: err,
    });
  }
}

/**
 * The longest message a client error carries. A client's error can quote its own input (a name,
 * a type word); the message is stored in history and sent back, so it is cut here whatever it
 * quotes (docs/security.md "Names are bounded").
 */
export const MAX_CLIENT_MESSAGE_CHARS = 2_000;

export function clientError(
  message: string,
  opts: { code?: GatewayCode; status?: number; param?: string; recorded?: string } = {},
): GatewayError {
  const cut = message.length > MAX_CLIENT_MESSAGE_CHARS
    ? `${message.slice(0, MAX_CLIENT_MESSAGE_CHARS)}… (cut from ${message.length} characters)`
    : message;
  return new GatewayError(cut, {
    code: opts.code ?? "gw.client.invalid_request",
    source: "client",
    status: opts.status,
    param: opts.param,
    recorded: opts.recorded,
  });
}
