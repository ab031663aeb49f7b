import type { Db } from "../db/client.ts";
import { livePeers, type Peer } from "../db/instances.ts";
import { FORWARDED_HEADER } from "../gateway/live/abort_forwarding.ts";
import { staleAfterMs } from "../gateway/live/heartbeat_timing.ts";
import { signPeerCall } from "../gateway/live/peer_signature.ts";
import { type Clock, REAL_TIME } from "../gateway/runtime/clock.ts";
import { joinBytes } from "../gateway/runtime/join_bytes.ts";
import type { Logger } from "../gateway/runtime/logger.ts";
import type { Metrics } from "../gateway/runtime/metrics.ts";
import type { LivePart } from "./api_types.ts";
import { LIVE_PEER_ANSWER_MAX_BYTES, peerAnswer } from "./live_peer_answer.ts";
import { type LiveQuery, liveQueryParams } from "./live_query.ts";

/** Where an instance answers its share of a live page to the others (signed calls only). */
export const LIVE_PEER_PATH = "/admin/peer/live";
/**
 * How long a tick waits for the other instances. Real milliseconds, like abort forwarding's bound:
 * a network round trip does not shrink under a time scale. A live peer answers a page in a few
 * milliseconds; one that has not answered by then is shown as not answering, and the page goes out without it
 * (docs/admin.md "Live requests").
 */
export const LIVE_PEER_ANSWER_MS = 1_000;
/** A peer that did not answer, or answered something unusable, is left alone this long. */
export const LIVE_PEER_QUIET_MS = 5_000;
/** How long the list of live instances read from the database is used before it is read again. */
export const LIVE_PEERS_REFRESH_MS = 5_000;

export interface LiveFleetDeps {
  db: Db;
  instanceId: string;
  clock: Clock;
  /** What times the wait for peers (LIVE_PEER_ANSWER_MS): real time unless a test says. */
  waits?: Clock;
  fetch: typeof fetch;
  log?: Logger;
  metrics?: Metrics;
  /** `PULSEGATE_PEER_SECRET`: without it no peer is asked (they are shown as not answering). */
  peerSecret?: string;
  /** `PULSEGATE_PUBLIC_URL`: peers reach only an instance that has one. */
  publicUrl?: string;
}

/** The others' shares of one page, and who did not give one. */
export interface FleetAnswers {
  parts: LivePart[];
  /** Every other live instance, by id. */
  peers: string[];
  silent: string[];
}

type Outcome = "ok" | "silent" | "refused" | "bad";

/**
 * Asks every other live instance (the instances table, each one's public URL) for its share of
 * a live page, with the signed calls abort forwarding uses (docs/scaling.md). One per process:
 * the list of peers and which of them are quiet are shared by the open tabs.
 */
export class LiveFleet {
  #deps: LiveFleetDeps;
  #peers: { list: Peer[]; until: number } | null = null;
  #reading: Promise<Peer[]> | null = null;
  /** Peers not asked until then: they did not answer, or answered something unusable. */
  #quietUntil = new Map<string, number>();
  #offNoted = false;

  constructor(deps: LiveFleetDeps) {
    this.#deps = deps;
  }

  /** The other live instances, read at most every LIVE_PEERS_REFRESH_MS. */
  async peers(): Promise<Peer[]> {
    const { clock, db, instanceId } = this.#deps;
    const now = clock.now();
    if (this.#peers && clock.elapsed(now, this.#peers.until) > 0) return this.#peers.list;
    this.#reading ??= livePeers(db, { self: instanceId, liveSince: now - staleAfterMs(clock) })
      .catch((err) => {
        this.#deps.log?.event("live.peers_unknown", { error: String(err) });
        return this.#peers?.list ?? [];
      })
      .then((list) => {
        this.#peers = { list, until: clock.deadline(LIVE_PEERS_REFRESH_MS) };
        return list;
      })
      .finally(() => (this.#reading = null));
    return await this.#reading;
  }

  /** Each peer's share of the page asked, within LIVE_PEER_ANSWER_MS whatever they do. */
  async ask(query: LiveQuery, opts: { signal: AbortSignal }): Promise<FleetAnswers> {
    const peers = await this.peers();
    const ids = peers.map((p) => p.instanceId);
    const { peerSecret, publicUrl, clock } = this.#deps;
    if (!peers.length) return { parts: [], peers: ids, silent: [] };
    if (!peerSecret || !publicUrl) {
      this.#noteOff();
      return { parts: [], peers: ids, silent: ids };
    }
    const now = clock.now();
    // The instance filter names one instance: the others have nothing to add.
    const asked = peers.filter((p) =>
      (query.instance === undefined || query.instance === p.instanceId) &&
      clock.elapsed(now, this.#quietUntil.get(p.instanceId) ?? 0) <= 0
    );
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    // A tab already gone asks nobody for long.
    if (opts.signal.aborted) onAbort();
    opts.signal.addEventListener("abort", onAbort, { once: true });
    const cancel = (this.#deps.waits ?? REAL_TIME).after(LIVE_PEER_ANSWER_MS, onAbort);
    try {
      const answers = await Promise.all(
        asked.map((peer) => this.#askOne(peer, { query, secret: peerSecret, signal: stop.signal })),
      );
      const parts = answers.filter((a): a is LivePart => a !== null);
      const answered = new Set(parts.map((p) => p.instance));
      const silent = ids.filter((id) =>
        (query.instance === undefined || query.instance === id) && !answered.has(id)
      );
      return { parts, peers: ids, silent };
    } finally {
      cancel();
      opts.signal.removeEventListener("abort", onAbort);
    }
  }

  async #askOne(
    peer: Peer,
    opts: { query: LiveQuery; secret: string; signal: AbortSignal },
  ): Promise<LivePart | null> {
    const { clock, instanceId } = this.#deps;
    // Named for the one instance it is for, and unique (two tabs may ask the same page in the
    // same millisecond), so the receiver's replay check never mistakes one for a copy.
    const body = JSON.stringify({
      scope: { admin: true },
      from: instanceId,
      to: peer.instanceId,
      nonce: crypto.randomUUID(),
      query: liveQueryParams(opts.query),
    });
    try {
      const signed = await signPeerCall({ method: "POST", path: LIVE_PEER_PATH, body }, {
        secret: opts.secret,
        now: clock.now(),
      });
      const res = await this.#deps.fetch(`${peer.url}${LIVE_PEER_PATH}`, {
        method: "POST",
        headers: { [FORWARDED_HEADER]: "1", "content-type": "application/json", ...signed },
        body,
        signal: opts.signal,
      });
      if (res.status !== 200) {
        await res.body?.cancel();
        return this.#skip(peer, { outcome: "refused", why: `answered ${res.status}` });
      }
      const text = await boundedText(res);
      if (text === null) {
        return this.#skip(peer, {
          outcome: "bad",
          why: `answer over ${LIVE_PEER_ANSWER_MAX_BYTES} bytes`,
        });
      }
      const answer = peerAnswer(text, { query: opts.query, instance: peer.instanceId });
      if (!answer.ok) return this.#skip(peer, { outcome: "bad", why: answer.why });
      this.#count("ok");
      return answer.part;
    } catch (err) {
      const why = opts.signal.aborted
        ? `no answer within ${LIVE_PEER_ANSWER_MS} ms`
        : `unreachable: ${String(err).slice(0, 200)}`;
      return this.#skip(peer, { outcome: "silent", why });
    }
  }

  /** A peer left out of the page: logged, counted, and left alone for a while. */
  #skip(peer: Peer, opts: { outcome: Outcome; why: string }): null {
    this.#quietUntil.set(peer.instanceId, this.#deps.clock.deadline(LIVE_PEER_QUIET_MS));
    this.#count(opts.outcome);
    this.#deps.log?.event("live.peer_skipped", {
      instance: peer.instanceId,
      url: peer.url,
      outcome: opts.outcome,
      why: opts.why,
    });
    return null;
  }

  #count(outcome: Outcome): void {
    this.#deps.metrics?.livePeerAnswers.inc({ outcome });
  }

  #noteOff(): void {
    if (this.#offNoted) return;
    this.#offNoted = true;
    this.#deps.log?.event("live.fleet_off", {
      note: "other instances are live, but the live list shows only this one's requests: " +
        "set PULSEGATE_PEER_SECRET and PULSEGATE_PUBLIC_URL on every instance",
    });
  }
}

/** The answer as text, or null past LIVE_PEER_ANSWER_MAX_BYTES: read no further than that. */
async function boundedText(res: Response): Promise<string | null> {
  const declared = Number(res.headers.get("content-length") ?? "0");
  if (declared > LIVE_PEER_ANSWER_MAX_BYTES) {
    await res.body?.cancel();
    return null;
  }
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      size += r.value.byteLength;
      if (size > LIVE_PEER_ANSWER_MAX_BYTES) return null;
      chunks.push(r.value);
    }
  } finally {
    reader.cancel().catch(() => {});
  }
  return joinBytes(chunks);
}
