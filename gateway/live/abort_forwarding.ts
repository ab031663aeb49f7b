import type { Db } from "../../db/client.ts";
import { livePeers, type Peer } from "../../db/instances.ts";
import { type Clock, REAL_TIME } from "../runtime/clock.ts";
import { staleAfterMs } from "./heartbeat_timing.ts";
import type { Logger } from "../runtime/logger.ts";
import { isRecord } from "../runtime/json.ts";
import type { AbortScope } from "./abort_scope.ts";
import { signPeerCall } from "./peer_signature.ts";
import type { Fence } from "./fence_set.ts";

/** Marks an abort already sent on once, so two instances never bounce it. */
export const FORWARDED_HEADER = "x-pulsegate-forwarded";

/**
 * How long an instance waits for the others before answering an abort it could not place. Real
 * milliseconds, not scaled by the time scale: a network round trip does not shrink in a scaled
 * test. A live peer answers in a few milliseconds; this bounds the cost of a hung one.
 */
export const PEER_ANSWER_MS = 1_500;

export interface ForwardingDeps {
  db: Db;
  instanceId: string;
  clock: Clock;
  fetch: typeof fetch;
  log: Logger;
  /** `PULSEGATE_PEER_SECRET`; without it nothing is forwarded. */
  peerSecret: string | undefined;
  /** `PULSEGATE_PUBLIC_URL`; without it nothing is forwarded either. */
  publicUrl: string | undefined;
}

/**
 * Forwarding needs both settings: the secret to sign with, and an address the operator chose
 * for this instance (its listen address may mean nothing to the others). Without them an abort
 * reaches only this process's requests (docs/scaling.md).
 */
export function forwardingOn(deps: Pick<ForwardingDeps, "peerSecret" | "publicUrl">): boolean {
  return Boolean(deps.peerSecret && deps.publicUrl);
}

/** An answer in the shape the control endpoints return. */
export interface PeerReply {
  status: number;
  body: unknown;
}

type PeerAnswer = { peer: Peer; reply: PeerReply | null };

export interface RequestAbortVerdict {
  /** The owner's 200, or a peer's refusal (401/403); null when no peer runs the request. */
  reply: PeerReply | null;
  /** Peers that gave no answer in time: the request may be running there. */
  silent: Peer[];
}

export interface SessionAbortVerdict {
  /** Ids the peers stopped. */
  stopped: string[];
  /** A peer's refusal (401/403), if any peer refused. */
  refusal: PeerReply | null;
  silent: Peer[];
}

export function isForwarded(request: Request): boolean {
  return request.headers.has(FORWARDED_HEADER);
}

/**
 * docs/scaling.md: each process knows only its own live requests, and the database learns of a running
 * request only after the history writer's deferral. So an abort for an id this process does not
 * run goes to every other live instance at once, signed with the peer secret and carrying the
 * caller's scope (admin, or a key id), never its credentials; the owner checks the scope and
 * stops it. The first 200 settles it.
 */
export async function forwardRequestAbort(
  id: string,
  opts: { scope: AbortScope; deps: ForwardingDeps },
): Promise<RequestAbortVerdict> {
  const answers = await askPeers(`/request/${encodeURIComponent(id)}/abort`, {
    ...opts,
    settles: (reply) => reply.status === 200,
  });
  const reply = answers.find((a) => a.reply?.status === 200)?.reply ??
    answers.find((a) => a.reply && a.reply.status !== 404)?.reply ?? null;
  const silent = reply ? [] : silentPeers(answers, opts.deps);
  return { reply, silent };
}

/**
 * Every other live instance stops its requests of the session; their lists are merged. The
 * session fence made here goes with it, so each peer holds it at once, before the agent's retry
 * could reach it (docs/scaling.md "Fences").
 */
export async function forwardSessionAbort(
  sessionId: string,
  opts: { scope: AbortScope; fence?: Fence | null; deps: ForwardingDeps },
): Promise<SessionAbortVerdict> {
  const answers = await askPeers(`/sessions/${encodeURIComponent(sessionId)}/abort`, opts);
  const stopped = answers.flatMap((a) => a.reply?.status === 200 ? stoppedIds(a.reply.body) : []);
  const refusal = answers.find((a) => a.reply && [401, 403].includes(a.reply.status))?.reply ??
    null;
  return { stopped, refusal, silent: silentPeers(answers, opts.deps) };
}

/** Asks every live peer in parallel; none is waited on longer than `PEER_ANSWER_MS`. */
async function askPeers(
  path: string,
  opts: {
    scope: AbortScope;
    fence?: Fence | null;
    deps: ForwardingDeps;
    settles?: (reply: PeerReply) => boolean;
  },
): Promise<PeerAnswer[]> {
  const { deps } = opts;
  const liveSince = deps.clock.now() - staleAfterMs(deps.clock);
  const peers = await livePeers(deps.db, { self: deps.instanceId, liveSince }).catch((err) => {
    deps.log.event("control.peers_unknown", { error: String(err) });
    return [];
  });
  if (!peers.length) return [];
  if (!deps.peerSecret || !deps.publicUrl) {
    noteForwardingOff(deps);
    return [];
  }
  const { peerSecret } = deps;
  const now = deps.clock.now();
  const stop = new AbortController();
  // Real time: a bound on a peer's network answer.
  const cancel = REAL_TIME.after(PEER_ANSWER_MS, () => stop.abort());
  try {
    return await Promise.all(peers.map(async (peer) => {
      // Each call names the one instance it is for, whose id is new at every start: a copy can
      // be played neither to another instance nor to this one once restarted (docs/scaling.md).
      const body = JSON.stringify({
        scope: opts.scope,
        from: deps.instanceId,
        to: peer.instanceId,
        ...(opts.fence ? { fence: opts.fence } : {}),
      });
      const signed = await signPeerCall({ method: "POST", path, body }, {
        secret: peerSecret,
        now,
      });
      const headers = new Headers({
        [FORWARDED_HEADER]: "1",
        "content-type": "application/json",
        ...signed,
      });
      const reply = await askPeer(`${peer.url}${path}`, {
        init: { headers, body },
        signal: stop.signal,
        deps,
      });
      // Once one answer settles it, the others are not worth waiting for.
      if (reply && opts.settles?.(reply)) stop.abort();
      return { peer, reply };
    }));
  } finally {
    cancel();
  }
}

/** The peer's status and JSON body, or null when it did not answer (in time, or in JSON). */
async function askPeer(
  url: string,
  opts: { init: { headers: Headers; body: string }; signal: AbortSignal; deps: ForwardingDeps },
): Promise<PeerReply | null> {
  try {
    const res = await opts.deps.fetch(url, { method: "POST", ...opts.init, signal: opts.signal });
    return { status: res.status, body: await res.json() };
  } catch {
    return null;
  }
}

let forwardingOffNoted = false;

/** Other instances are live but this one may not reach them: say so once per process. */
function noteForwardingOff(deps: ForwardingDeps): void {
  if (forwardingOffNoted) return;
  forwardingOffNoted = true;
  deps.log.event("control.forwarding_off", {
    note: "other instances are live, but aborts reach only this one's requests: " +
      "set PULSEGATE_PEER_SECRET and PULSEGATE_PUBLIC_URL on every instance",
  });
}

function silentPeers(answers: PeerAnswer[], deps: ForwardingDeps): Peer[] {
  const silent = answers.filter((a) => a.reply === null).map((a) => a.peer);
  for (const peer of silent) {
    deps.log.event("control.peer_silent", { instance: peer.instanceId, url: peer.url });
  }
  return silent;
}

function stoppedIds(body: unknown): string[] {
  const ids = isRecord(body) ? body.requests : [];
  return Array.isArray(ids) ? ids.filter((x): x is string => typeof x === "string") : [];
}
