import { configKey } from "../config/config_keys.ts";
import type { RunState } from "../policy/run_state.ts";
import type { AbortRegistry } from "../live/abort_registry.ts";
import { authorize, configInForce, routeFor } from "./admission.ts";
import { clientHeaders } from "../formats/client_headers.ts";
import { errorResponse } from "../forward/client_channel.ts";
import type { Config } from "../config/schema.ts";
import type { ClientCodec, ClientRequestContext } from "../formats/format.ts";
import { clientError, GatewayError } from "../runtime/gateway_error.ts";
import type { ForwardDeps } from "../forward/hop.ts";
import type { IrRequest } from "../formats/ir.ts";
import { type HistorySink, LiveRequest } from "../live/live_request.ts";
import { newRequestId } from "../live/request_id.ts";
import { checkGuardrails } from "../policy/guardrails.ts";
import { requireJsonContentType } from "./json_content_type.ts";
import { BODY_LIMIT_BYTES } from "./read_body.ts";
import { readBodyBytes } from "./body_bytes.ts";
import { parseRequestBody } from "../formats/json_guard.ts";
import { bodyDigest, SessionLimits } from "../policy/session_limits.ts";
import type { KeyRefusalBudget } from "../policy/key_refusal_budget.ts";
import type { RefusedBudget } from "../policy/refused_budget.ts";
import { boundedSession, headerSession, promptSession } from "../formats/session_ids.ts";
import { isRecord } from "../runtime/json.ts";
import { clientDisconnected } from "../forward/stop_reasons.ts";
import { forwardStream } from "../forward/stream_forward.ts";
import { forwardWhole } from "../forward/whole_forward.ts";
import { incomingTrace } from "../live/trace_context.ts";
import { admitKey, meteredBilling } from "../policy/key_limits.ts";
import type { KeyUsageMeter } from "../policy/key_usage_meter.ts";
import { KeyInFlight } from "../policy/key_in_flight.ts";
import { onePer } from "../runtime/memo.ts";
import { interactionPin } from "../route/interaction_pin.ts";
import { checkContinuations } from "../route/continuation_check.ts";
import type { EmbedClient, EmbedRequest } from "../formats/embeddings.ts";
import { embedIr } from "../formats/embed_ir.ts";
import { forwardEmbeddings } from "../forward/embed_forward.ts";
import { releasedWhenTaken } from "./held_answer.ts";
import type { Fences } from "../live/fences.ts";

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export interface ProxyDeps extends Omit<ForwardDeps, "config"> {
  state: RunState;
  registry: AbortRegistry;
  sink: HistorySink;
  instanceId: string;
  /** Settles when every request has ended; shutdown waits on these. */
  pending: Set<Promise<void>>;
  /** Whether history already holds a row with this id (queued or stored). */
  requestIdTaken: (id: string) => Promise<boolean>;
  /** Per-key usage shared through the database, for key limits (docs/config.md). */
  keyMeter?: KeyUsageMeter;
  /** How many refused requests still get a row this minute (docs/security.md). */
  refusedBudget: RefusedBudget;
  /** How many of each key's requests refused after auth still get a row this minute. */
  keyRefusals: KeyRefusalBudget;
  /** Per-key session budgets and loop breakers (docs/config.md "Session limits"). */
  sessionLimits?: SessionLimits;
  /** What operators' aborts fenced (docs/design.md "Abort and disconnect"). */
  fences?: Fences;
}

interface Admitted {
  config: Config;
  keyId: string | null;
}

/**
 * Auth first, and the request id after it: a caller-chosen id is honoured only
 * for an authorized request, and never when a row with it exists, so no one can
 * replace another request's row (docs/security.md). A refused request gets a
 * generated id for its own row.
 */
interface Admission {
  id: string;
  admitted: Admitted | GatewayError;
  refused?: boolean;
  /** The key auth found, even when the request is refused after it (its refusal budget). */
  keyId?: string | null;
}

/** Synchronous unless a caller-chosen id must be looked up: most requests await nothing here. */
function admit(
  request: Request,
  opts: { asked: string | null; deps: ProxyDeps },
): Admission | Promise<Admission> {
  const { asked, deps } = opts;
  const now = deps.clock.now();
  let admitted: Admitted;
  try {
    const config = configInForce(deps.state);
    const keyId = authorize(request, { config, loopback: deps.state.loopback, env: deps.env });
    admitted = { config, keyId };
  } catch (err) {
    return { id: newRequestId(now), admitted: GatewayError.from(err), refused: true };
  }
  if (asked === null) return { id: newRequestId(now), admitted };
  if (!REQUEST_ID.test(asked)) {
    // Bad input like any other: answered 400 and recorded, under an id of its own.
    const err = clientError("x-request-id must be 1-128 characters of A-Za-z0-9._:-", {
      param: "x-request-id",
    });
    return { id: newRequestId(now), admitted: err, keyId: admitted.keyId };
  }
  return askedIdFree(asked, { admitted, deps });
}

async function askedIdFree(
  asked: string,
  opts: { admitted: Admitted; deps: ProxyDeps },
): Promise<Admission> {
  if (await opts.deps.requestIdTaken(asked)) {
    const now = opts.deps.clock.now();
    return { ...duplicate(asked, { why: "was already used", now }), keyId: opts.admitted.keyId };
  }
  return { id: asked, admitted: opts.admitted };
}

function duplicate(
  asked: string,
  { why, now }: { why: string; now: number },
): { id: string; admitted: GatewayError } {
  const err = clientError(`request id ${asked} ${why}`, {
    code: "gw.client.duplicate_request_id",
    param: "x-request-id",
  });
  return { id: newRequestId(now), admitted: err };
}

/**
 * One client request from arrival to its recorded end. The row is opened
 * right after auth and the id check (a refused request gets a row under a
 * generated id), before the body is read, so bad input is recorded too, and
 * closed by a `finally`, so no path skips it. The key's place in progress,
 * taken before the body is read, is given back when the row closes. With `embed` the request
 * is an embeddings call (docs/providers.md "Embeddings"): the same admission, body, route and
 * guardrails, its errors in `codec`'s format.
 */
export async function handleProxy(
  request: Request,
  opts: { codec: ClientCodec; ctx: ClientRequestContext; deps: ProxyDeps; embed?: EmbedClient },
): Promise<Response> {
  const { codec, deps } = opts;
  const asked = request.headers.get("x-request-id");
  const admission = admit(request, { asked, deps });
  let { id, admitted, refused = false, keyId = null } = admission instanceof Promise
    ? await admission
    : admission;
  // The key auth found: the refusal budget the request's row counts against (docs/security.md).
  if (!(admitted instanceof GatewayError)) keyId = admitted.keyId;
  if (refused && admitted instanceof GatewayError && !deps.refusedBudget.take()) {
    // Beyond the budget a refusal costs no row and no queue slot (docs/security.md).
    deps.metrics.refusedUnrecorded.inc();
    return errorResponse(codec, admitted, { requestId: id });
  }
  // Checked here, with no await before the registry takes the id, so two requests racing on
  // one new name cannot both run under it.
  if (id === asked && deps.registry.has(id)) {
    ({ id, admitted } = duplicate(id, { why: "is already running", now: deps.clock.now() }));
  }
  const live = new LiveRequest({
    id,
    instanceId: deps.instanceId,
    clientFormat: opts.embed?.format ?? codec.format,
    route: opts.ctx.pathModel ?? null,
    stream: opts.ctx.pathStream ?? false,
    keyId: admitted instanceof GatewayError ? null : admitted.keyId,
    sessionId: headerSession(codec.format, request.headers),
    trace: incomingTrace(request.headers, { recording: deps.state.tracing?.() ?? false }),
  }, {
    clock: deps.clock,
    sink: deps.sink,
    metrics: deps.metrics,
    expendable: refused,
    // Before auth the budget above applies; after it, the key's own (docs/security.md).
    refusal: refused ? undefined : deps.keyRefusals.reserve(keyId),
  });
  deps.registry.add(live);
  if (!(admitted instanceof GatewayError)) {
    live.billWith(meteredBilling(admitted.config, { keyId: admitted.keyId, meter: deps.keyMeter }));
  }
  deps.metrics.inflight++;
  const onClientGone = () => live.abort(clientDisconnected());
  // No `{ once: true }`: the `finally` removes it, and the options object costs about a microsecond.
  request.signal.addEventListener("abort", onClientGone);
  const places: Places = { key: null, vectors: null };
  let answer!: (response: Response) => void;
  const response = new Promise<Response>((resolve) => (answer = resolve));
  let life: Promise<void> | null = null;
  // The request's whole life, a stream's included, in one function: its one `finally` writes the
  // row whatever ends it (an answer, an error, an abort, the client gone, a fault of ours).
  life = (async () => {
    try {
      const served = await serve(request, { ...opts, live, admitted, places });
      if (served instanceof Response) return answer(served);
      // A stream: its response goes out as soon as it is decided, and it runs on to its end.
      answer(await served.response);
      await served.done;
    } catch (err) {
      const error = GatewayError.from(err);
      live.end({ status: error.status, error });
      answer(errorResponse(codec, error, { requestId: id }));
    } finally {
      live.finish();
      places.key?.();
      places.vectors?.();
      request.signal.removeEventListener("abort", onClientGone);
      deps.registry.drop(live);
      deps.metrics.inflight--;
      if (life) deps.pending.delete(life);
    }
  })();
  // Settles when the request has ended; shutdown waits on it. One that ended already is not kept.
  if (!live.finished) deps.pending.add(life);
  return await response;
}

/** What the request holds until it ends: its key's place in progress, its vectors' budget share. */
interface Places {
  key: (() => void) | null;
  /** An embeddings answer's share of the vector budget, until its body takes it over. */
  vectors: (() => void) | null;
}

/**
 * Everything between admission and the answer: its response, or a stream's (answered once its
 * headers are decided, `done` at its end). Each way it ends settles the request
 * (`LiveRequest.end`); the caller's `finally` writes the row.
 */
async function serve(
  request: Request,
  opts: {
    codec: ClientCodec;
    ctx: ClientRequestContext;
    deps: ProxyDeps;
    embed?: EmbedClient;
    live: LiveRequest;
    admitted: Admitted | GatewayError;
    places: Places;
  },
): Promise<Response | { response: Promise<Response>; done: Promise<void> }> {
  const { codec, deps, live, admitted, places } = opts;
  if (admitted instanceof GatewayError) return failed(admitted, { live, codec });
  const held = await admitBeforeBody(request, { deps, admitted });
  if (held instanceof GatewayError) return failed(held, { live, codec });
  places.key = held;
  const started = await begin(request, {
    codec,
    embed: opts.embed,
    ctx: opts.ctx,
    deps,
    live,
    admitted,
  });
  if (started instanceof GatewayError) return failed(started, { live, codec });
  const fdeps = forwardDeps(deps, started.config);
  if (started.embed && opts.embed) {
    const embedReq = { live, ir: started.ir, body: started.body, codec, ctx: opts.ctx };
    const { response, error, release } = await forwardEmbeddings(
      { ...embedReq, route: started.route, embed: started.embed },
      { deps: fdeps, client: opts.embed },
    );
    places.vectors = release;
    if (error || !response) return failed(error ?? GatewayError.from("no answer"), { live, codec });
    live.end({ status: 200 });
    // The vectors stay in memory until the client has read them: the key's place and their
    // share of the vector budget with them.
    const releasePlace = places.key;
    places.key = null;
    places.vectors = null;
    return releasedWhenTaken(response, () => {
      releasePlace?.();
      release();
    });
  }
  const fwd = {
    live,
    ir: started.ir,
    body: started.body,
    codec,
    // Answers name reshaped tools as the client declared them.
    ctx: started.ir.clientTools ? { ...opts.ctx, clientTools: started.ir.clientTools } : opts.ctx,
    route: started.route,
    pin: started.pin,
    clientHeaders: clientHeaders(codec.format, request),
  };
  // Returned, not awaited here: only the caller waits through a stream (a held one's heap).
  if (started.ir.stream) return forwardStream(fwd, fdeps);
  const { response, error } = await forwardWhole(fwd, fdeps);
  if (error || !response) return failed(error ?? GatewayError.from("no answer"), { live, codec });
  live.end({ status: 200 });
  return response;
}

/**
 * Every way a request ends short of an answer: its settlement, its error in the client's format.
 * A function, not a closure per request: most requests never fail.
 */
function failed(error: GatewayError, opts: { live: LiveRequest; codec: ClientCodec }): Response {
  opts.live.end({ status: error.status, error });
  return errorResponse(opts.codec, error, { requestId: opts.live.record.id });
}

/** The forward stage's deps under one config, made once per config rather than per request. */
const forwardDepsMade = new WeakMap<ProxyDeps, { config: Config; deps: ForwardDeps }>();

function forwardDeps(deps: ProxyDeps, config: Config): ForwardDeps {
  const made = forwardDepsMade.get(deps);
  if (made?.config === config) return made.deps;
  const fdeps: ForwardDeps = { ...deps, config };
  forwardDepsMade.set(deps, { config, deps: fdeps });
  return fdeps;
}

/** Places in progress per key (`keys[].max_in_flight`), one count per proxy. */
export const keyInFlight = onePer((deps: ProxyDeps) => new KeyInFlight(deps.metrics));

/**
 * What is decided before a byte of the body is read (docs/security.md "Request bodies and
 * per-key concurrency"): the content type, the key's places in progress, then its rpm, tpm and
 * budget (which count the request). A refused request never has its body read: it is answered
 * even when its body never comes. Answers the release of the key's place (null without a key),
 * or the refusal.
 */
async function admitBeforeBody(
  request: Request,
  opts: { deps: ProxyDeps; admitted: Admitted },
): Promise<(() => void) | null | GatewayError> {
  const { deps } = opts;
  const { config, keyId } = opts.admitted;
  let release: (() => void) | null = null;
  try {
    requireJsonContentType(request);
    const key = configKey(config, keyId);
    if (key) {
      const taken = keyInFlight(deps).take(key);
      if (taken instanceof GatewayError) return taken;
      release = taken;
    }
    // Null when the key has no limits or there is no meter: nothing to await then.
    const keyAdmission = admitKey(config, { keyId, meter: deps.keyMeter, now: deps.clock.now });
    if (keyAdmission) await keyAdmission;
    return release;
  } catch (err) {
    release?.();
    return GatewayError.from(err);
  }
}

/**
 * The key's session limits (docs/config.md "Session limits"), once the session is known: null
 * when there is nothing to check (no session, no limit), so most requests await nothing here.
 */
function admitSession(
  live: LiveRequest,
  opts: { config: Config; keyId: string | null; bytes: Uint8Array; deps: ProxyDeps },
): Promise<void> | null {
  const { keyId, deps } = opts;
  const sessionId = live.record.sessionId;
  const limits = deps.sessionLimits;
  if (keyId === null || sessionId === null || !limits) return null;
  const key = configKey(opts.config, keyId);
  if (!SessionLimits.applies(key)) return null;
  if (key.session_budget && live.billing) {
    live.billWith(limits.billing(live.billing, { keyId, sessionId }));
  }
  return limits.admit(key, { sessionId, bodyDigest: () => bodyDigest(opts.bytes) });
}

interface Started {
  config: Config;
  ir: IrRequest;
  body: Record<string, unknown>;
  route: Config["routes"][number];
  /** The one upstream storing the interaction the request continues, if it continues one. */
  pin?: string;
  /** An embeddings request, parsed by its client's `EmbedClient`. */
  embed?: EmbedRequest;
}

/** Everything after admission before the first upstream call: body, route. Errors are returned, not thrown. */
async function begin(
  request: Request,
  opts: {
    codec: ClientCodec;
    embed?: EmbedClient;
    ctx: ClientRequestContext;
    deps: ProxyDeps;
    live: LiveRequest;
    admitted: Admitted;
  },
): Promise<Started | GatewayError> {
  const { deps, live } = opts;
  const { config, keyId: key } = opts.admitted;
  try {
    const bytes = await readBodyBytes(request, {
      limit: BODY_LIMIT_BYTES,
      signal: live.signal,
      clock: deps.clock,
    });
    const body = await parseRequestBody(bytes);
    if (!isRecord(body)) {
      throw clientError("request body must be a JSON object", { code: "gw.client.invalid_json" });
    }
    const embed = opts.embed?.parse(body, opts.ctx);
    const ir = embed ? embedIr(embed) : opts.codec.parseRequest(body, opts.ctx);
    // A client that names no session gets one from its prompt (docs/observability.md
    // "Cache-aware affinity").
    live.parsed(ir, {
      sessionId: live.record.sessionId ??
        (ir.sessionHint === undefined ? promptSession(ir) : boundedSession(ir.sessionHint)),
    });
    const route = routeFor(config, { model: ir.model, keyId: key });
    live.routed(route.model);
    // An operator's fence refuses here: no slot taken, no upstream called, nothing billed.
    const fenced = deps.fences?.refusal({ keyId: key, sessionId: live.record.sessionId, ir });
    if (fenced) throw fenced;
    const sessionCheck = admitSession(live, { config, keyId: key, bytes, deps });
    if (sessionCheck) await sessionCheck;
    // Null when guardrails are off: nothing to await then.
    // Token ids are no text a rule can read (docs/security.md "Guardrails are bounded").
    const tokens = embed !== undefined && embed.tokenIds > 0;
    const guardrails = checkGuardrails(body, { model: ir.model, deps, tokens });
    if (guardrails) await guardrails;
    // Another key's continuation is refused before any upstream call (docs/design.md
    // "Continuation ids").
    const continuations = checkContinuations(ir, { keyId: key, config, owners: deps.owners });
    if (continuations) await continuations;
    // A stored conversation goes where it is stored, or nowhere (docs/interactions.md).
    const pin = ir.providerState?.continues === undefined
      ? undefined
      : await interactionPin(ir, { route, keyId: key, config, homes: deps.homes });
    return { config, ir, body, route, pin, embed };
  } catch (err) {
    return GatewayError.from(err);
  }
}
