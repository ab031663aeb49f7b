import { REAL_TIME } from "../runtime/clock.ts";
import type { FrameDecoder } from "./frame_decoder.ts";
import type { ClientHeaders, UpstreamPost } from "./client_headers.ts";
import type { Config, Upstream } from "../config/schema.ts";
import type { GatewayError } from "../runtime/gateway_error.ts";
import type { IrClientTools, IrEvent, IrRequest, IrResponse, IrUsage } from "./ir.ts";

import type { ClientFormat, UpstreamKind } from "../runtime/wire_kinds.ts";
export type { ClientFormat, UpstreamKind };

/** One unit of an upstream stream, as the failover engine sees it. */
export interface UpstreamFrame {
  /** Exact bytes, for same-format pass-through. */
  raw: Uint8Array;
  /** docs/design.md "Pulse": does this frame restart the idle timer and end the hold? */
  content: boolean;
  /** What it means, for translation into another format. */
  events: IrEvent[];
  /** Usage reported in this frame, if any. */
  usage?: IrUsage;
  /** An error the upstream reported inside its stream. */
  error?: GatewayError;
  /**
   * Whether its events hold a finish, where the reader knows without building
   * them (`events` may then be computed only when read).
   */
  finishes?: boolean;
  /** The characters of text its events carry, where the reader knows without building them. */
  chars?: number;
  /** The format's own end-of-stream marker (`[DONE]`, `message_stop`): the answer is complete. */
  terminal?: boolean;
  /** Handles a later request may name to continue this answer (`IrResponse.continuations`). */
  continuations?: string[];
  /**
   * The content block this frame opens or closes, by the format's own index (Anthropic): what a
   * passed-through stream leaves open, for the client's encoder to close before a final error.
   */
  block?: { index: number; open: boolean };
}

export interface UpstreamCall {
  ir: IrRequest;
  /** The client's parsed body when it speaks this upstream's format: sent on with only the model swapped. */
  passthrough?: Record<string, unknown>;
  /** The client's provider headers and query flags: only ever set with `passthrough`. */
  forwarded?: ClientHeaders;
  upstream: Upstream;
  model: string;
  env: (name: string) => string | undefined;
  config: Config;
  /** The hop's stop: ends a wait before the call is sent (an access token, docs/providers.md). */
  signal?: AbortSignal;
  /** The gateway's fetch, for what an adapter fetches before the call (an access token). */
  fetch?: typeof fetch;
}

/** What the gateway needs to call one kind of upstream. */
export interface UpstreamAdapter {
  kind: UpstreamKind;
  /**
   * What of a translated request this kind has no field for, one description
   * each; empty when it can take it all. Pure, so the engine can skip a
   * candidate before any attempt: `buildRequest` refuses the same things.
   * Provider-run tools are not listed here: whether one the kind lacks may be
   * left out is the route's call (gateway/formats/builtin_tools.ts, gateway/route/candidates.ts).
   */
  unsupportedFor(ir: IrRequest): string[];
  buildRequest(call: UpstreamCall): Promise<Request>;
  /** The same request as a url and init, for fetch to build its one Request from (the hot path). */
  buildPost?(call: UpstreamCall): Promise<UpstreamPost>;
  /** Splits a 200 streamed body into frames. */
  decodeStream(): ReadableWritablePair<UpstreamFrame, Uint8Array>;
  /** The same, driven synchronously by the stream path (no stream step per chunk), where the format has one. */
  frameDecoder?(): FrameDecoder;
  /** Parses a 200 whole body; throws GatewayError on a body it cannot read. */
  decodeWhole(body: string): IrResponse;
  /**
   * Reads an error status and body into the gateway's error; `headers` are
   * the answer's (content type, Bedrock's exception name).
   */
  decodeError(status: number, body: string, opts?: { headers?: Headers }): GatewayError;
}

/** Writes one streamed answer in a client's format; stateful across events. */
export interface ClientStreamEncoder {
  /** Bytes that open the stream before any event (Gemini's "["), if any. */
  open(): Uint8Array | null;
  encode(event: IrEvent): Uint8Array | null;
  /** Closes a successful stream (`[DONE]`, `message_stop`, "]"). */
  close(): Uint8Array | null;
  /** Ends the stream with the client's error event. */
  error(err: GatewayError): Uint8Array;
  /**
   * A frame of the client's own format passed on as the upstream sent it, not through `encode`:
   * for an encoder whose error must know where the client's stream stands (Anthropic's blocks).
   */
  passed?(frame: UpstreamFrame): void;
  /**
   * The same error once more, written on its own after `error`, for clients
   * that read another form of it (Gemini SSE: the bare object for Google's
   * SDK, then a `data:` event for strict SSE readers; docs/architecture.md).
   */
  errorAgain?(err: GatewayError): Uint8Array | null;
}

export interface ClientRequestContext {
  /** Model from the URL path (Gemini). */
  pathModel?: string;
  /** Streaming chosen by the URL (Gemini's streamGenerateContent). */
  pathStream?: boolean;
  /** Gemini's `alt=sse`: SSE instead of a streamed JSON array. */
  sse?: boolean;
  /** The request's reshaped tools (`IrRequest.clientTools`), for answers to name calls as the client does. */
  clientTools?: IrClientTools;
  /**
   * The gateway's clock (epoch ms), for the times an answer states (`created`); the system
   * clock where none is given (a format's own tests).
   */
  now?: () => number;
}

/** The time an answer states: the given clock's, else the system's. */
export function answerTime(ctx?: { now?: () => number }): number {
  return (ctx?.now ?? REAL_TIME.now)();
}

/** What a stream encoder needs to know about the answer it writes. */
export interface StreamMeta extends ClientRequestContext {
  id: string;
  model: string;
}

export interface ClientStreamShape {
  contentType: string;
  /** A keep-alive block, or null where the client cannot take one (Gemini). */
  keepAlive: Uint8Array | null;
  /** The upstream kind whose raw stream bytes this client can take unchanged. */
  passthroughFrom: UpstreamKind | null;
  /**
   * The format's own end marker (`[DONE]`, `message_stop`), sent after a
   * passed-through stream that finished its answer but left the marker out.
   */
  endMarker: Uint8Array | null;
}

/** What the gateway needs to serve one kind of client. */
export interface ClientCodec {
  format: ClientFormat;
  parseRequest(body: unknown, ctx: ClientRequestContext): IrRequest;
  encodeWhole(res: IrResponse, ctx?: ClientRequestContext): unknown;
  streamShape(ctx: ClientRequestContext): ClientStreamShape;
  streamEncoder(meta: StreamMeta): ClientStreamEncoder;
  /** The error body in this client's format. */
  renderError(err: GatewayError): unknown;
}
