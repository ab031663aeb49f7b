/**
 * A whole gateway in virtual time (docs/architecture.md "Time"): `startGateway` with a
 * VirtualClock, no socket (`listen: false`), and in-process fake upstreams behind its injected
 * `fetch`. Requests go to `Gateway.handler`; every timer of the gateway and of the fakes is
 * virtual, so a liveness promise is tested at its real duration (a 300 s idle timeout, a 20 min
 * stream) in microseconds, and each assertion names the exact instant something happened.
 */
import type { AttemptRecord, RequestRecord } from "../db/records.ts";
import { getRequest, listAttempts } from "../db/history_queries.ts";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { readSettings } from "../gateway/start/settings.ts";
import { type Gateway, startGateway } from "../gateway/start/start_gateway.ts";
import type { FakeUpstream } from "./fake_upstreams/server.ts";
import { type InProcessUpstreams, inProcessUpstreams } from "./fake_upstreams/in_process.ts";
import { freshDatabase } from "./fresh_database.ts";
import { chatRoute } from "./harness.ts";
import { VirtualClock } from "./virtual_clock.ts";

/** One piece of an answer's body, and the virtual ms since the request was sent it arrived. */
export interface Piece {
  at: number;
  text: string;
}

/** What a client received: status, headers, the body as it came, and how it ended. */
export interface Received {
  status: number;
  headers: Headers;
  /** Virtual ms from sending to the response's headers. */
  headersAt: number;
  pieces: Piece[];
  text: string;
  /** Virtual ms from sending to the body's end (or its error). */
  endedAt: number;
  /** The body ended in an error (a cut connection) rather than its end. */
  broken: boolean;
}

export interface VirtualGateway extends AsyncDisposable {
  gw: Gateway;
  clock: VirtualClock;
  ups: FakeUpstream[];
  /** The in-process upstreams behind its `fetch` (`start` adds one). */
  fakes: InProcessUpstreams;
  /** The folder of its database. */
  dir: string;
  /**
   * A `fetch` that reaches the gateway's handler without a socket, for an SDK's `fetch` option
   * (its calls must run inside `run`, where virtual time passes).
   */
  fetch: typeof fetch;
  /**
   * A client of its own: a `fetch` like the one above whose requests and answers all end when
   * it hangs up, as a process closing its connections (an SDK that stopped reading at an error
   * event leaves the rest of the answer unread, which holds the gateway's writes otherwise).
   */
  client(): { fetch: typeof fetch; hangUp(): void };
  /** The base URL `fetch` answers at, for an SDK's `baseURL`. */
  url: string;
  /** Sends a request and reads its whole answer, all in virtual time. */
  send(path: string, body: unknown, opts?: SendOptions): Promise<Received>;
  /**
   * `send` without driving the clock, for work already inside `run` (several requests side by
   * side, a request and an abort of it): its instants are virtual all the same.
   */
  exchange(path: string, body: unknown, opts?: SendOptions): Promise<Received>;
  /**
   * Inside a `run`: resolves once `check` holds, looking again at each real turn of the event
   * loop (virtual time passes only as `run` moves it); throws, naming `what`, after 10 000 turns.
   */
  until(check: () => boolean | Promise<boolean>, what?: string): Promise<void>;
  /** The request's history row and hops, once written. */
  row(id: string): Promise<{ request: RequestRecord; attempts: AttemptRecord[] }>;
  /** `row` without driving the clock, for work already inside `run`. */
  rowIn(id: string): Promise<{ request: RequestRecord; attempts: AttemptRecord[] }>;
  /** Runs `work` in virtual time (timers fire as it waits). */
  run<T>(work: Promise<T>, opts?: { limitMs?: number }): Promise<T>;
  stop(): Promise<void>;
  /** Its stop leaves the database and upstreams to an instance that `share`s them. */
  keepDir(): void;
}

export interface SendOptions {
  headers?: Record<string, string>;
  method?: string;
  /** The client leaves (its connection closes) this many virtual ms after sending. */
  leaveAfterMs?: number;
  /** Ends the read at this many virtual ms though the answer goes on (a client that stops). */
  limitMs?: number;
  /** The client leaves (its connection closes) when this aborts. */
  signal?: AbortSignal;
  /** The request's body as a stream the test feeds (in place of `body`), e.g. in virtual time. */
  bodyStream?: ReadableStream<Uint8Array>;
  /** A slow reader: after each piece it reads, the client waits this many virtual ms. */
  readGapMs?: number;
}

/**
 * A gateway over `upstreams` in-process fakes (default one) on a virtual clock. The config
 * defaults to one chat route over the fakes in order (tests/harness.ts `chatRoute`).
 */
export async function startVirtualGateway(
  opts: {
    upstreams?: number;
    config?: (urls: string[]) => ConfigInput | undefined;
    failover?: ConfigInput["failover"];
    env?: Record<string, string>;
    clock?: VirtualClock;
    /**
     * Virtual time stands still while a `crypto.subtle` call is in flight (a Bedrock request's
     * SigV4 signature, a session's hash): that real work otherwise lets the clock run on to its
     * next timer, and an instant after it is late by as much.
     */
    cryptoHoldsTime?: boolean;
    /**
     * A second instance beside `share`, or the same one restarted: its clock, its upstreams and
     * its database (which `share`'s stop leaves in place; this one's stop removes it).
     */
    share?: VirtualGateway;
    /** The pools' randomness (default Math.random): seed it for figures that hold on every run. */
    random?: () => number;
    /** Whether /metrics answers without the admin token (default true). */
    metricsOpen?: boolean;
  } = {},
): Promise<VirtualGateway> {
  const { share } = opts;
  const clock = share?.clock ?? opts.clock ?? new VirtualClock();
  const cryptoHold = opts.cryptoHoldsTime ? holdForCrypto() : null;
  if (cryptoHold) clock.holdWhile(cryptoHold.busy);
  const fakes = share?.fakes ?? inProcessUpstreams(clock);
  const ups = share?.ups ?? Array.from({ length: opts.upstreams ?? 1 }, () => fakes.start());
  const urls = ups.map((u) => u.url);
  const config = opts.config ? opts.config(urls) : chatRoute(urls, { failover: opts.failover });
  const dir = share?.dir ?? await Deno.makeTempDir({ prefix: "pulsegate-virtual-" });
  if (share) share.keepDir();
  else await freshDatabase(`${dir}/pulsegate.db`);
  const env = (name: string) => opts.env?.[name];
  const gw = await clock.run(startGateway({
    settings: {
      ...readSettings(env),
      host: "127.0.0.1",
      port: 0,
      dbUrl: `file:${dir}/pulsegate.db`,
    },
    env,
    configFile: config,
    quiet: true,
    metricsOpen: opts.metricsOpen ?? true,
    historyThread: "this",
    listen: false,
    clock,
    fetch: fakes.fetch,
    random: opts.random,
  }));
  let stopped: Promise<void> | null = null;
  let keep = false;
  const stop = () =>
    stopped ??= (async () => {
      await clock.run(gw.shutdown());
      cryptoHold?.release();
      if (keep) return;
      for (const up of ups) await up.close();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    })();
  const rowIn = async (id: string) => {
    for (let tries = 0;; tries++) {
      await gw.writer.flush();
      const request = await getRequest(gw.db, id);
      if (request && request.state !== "open") {
        return { request, attempts: await listAttempts(gw.db, id) };
      }
      if (tries > 100) throw new Error(`request ${id} was never recorded as ended`);
      await clock.sleep(100);
    }
  };
  return {
    gw,
    clock,
    ups,
    fakes,
    dir,
    keepDir: () => (keep = true),
    url: "http://127.0.0.1",
    run: (work, o) => clock.run(work, o),
    fetch: async (input, init) => await gw.handler(new Request(input, init), INFO),
    client: () => hangingUpClient(gw),
    send: (path, body, o = {}) => clock.run(exchange(gw, { path, body, clock, ...o })),
    exchange: (path, body, o = {}) => exchange(gw, { path, body, clock, ...o }),
    async until(check, what = "condition") {
      for (let turn = 0; !(await check()); turn++) {
        if (turn > 10_000) throw new Error(`not met: ${what}`);
        await new Promise((resolve) => setTimeout(resolve, 0));
      }
    },
    row: (id) => clock.run(rowIn(id)),
    rowIn,
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

/** `crypto.subtle` calls in flight, while its methods are wrapped (`holdForCrypto`). */
let cryptoInFlight = 0;
/** Gateways that asked for the wrapping; the originals go back when the last one stops. */
let cryptoHolders = 0;
let cryptoOriginals: [string, PropertyDescriptor | undefined][] = [];

/**
 * Counts `crypto.subtle` calls in flight, process-wide, by wrapping its methods on the instance
 * until `release` is called by every gateway that asked (tests share a process: what one changes
 * goes back). Answers whether any is in flight.
 */
function holdForCrypto(): { busy: () => boolean; release: () => void } {
  const subtle = crypto.subtle as unknown as Record<string, unknown>;
  if (cryptoHolders++ === 0) {
    const proto = Object.getPrototypeOf(crypto.subtle) as Record<string, unknown>;
    cryptoOriginals = [];
    for (const name of Object.getOwnPropertyNames(proto)) {
      const method = proto[name];
      if (name === "constructor" || typeof method !== "function") continue;
      cryptoOriginals.push([name, Object.getOwnPropertyDescriptor(subtle, name)]);
      subtle[name] = async (...args: unknown[]) => {
        cryptoInFlight++;
        try {
          return await (method as (...a: unknown[]) => Promise<unknown>).apply(crypto.subtle, args);
        } finally {
          cryptoInFlight--;
        }
      };
    }
  }
  let released = false;
  return {
    busy: () => cryptoInFlight > 0,
    release() {
      if (released) return;
      released = true;
      if (--cryptoHolders > 0) return;
      for (const [name, own] of cryptoOriginals) {
        if (own) Object.defineProperty(subtle, name, own);
        else delete subtle[name];
      }
    },
  };
}

const INFO = {
  remoteAddr: { transport: "tcp", hostname: "127.0.0.1", port: 40_000 },
  completed: Promise.resolve(),
} as unknown as Deno.ServeHandlerInfo<Deno.NetAddr>;

function hangingUpClient(gw: Gateway): { fetch: typeof fetch; hangUp(): void } {
  const gone = new AbortController();
  return {
    async fetch(input, init) {
      const signal = init?.signal ? AbortSignal.any([init.signal, gone.signal]) : gone.signal;
      const response = await gw.handler(new Request(input, { ...init, signal }), INFO);
      if (!response.body) return response;
      // The answer through a stage of our own, cut (its source cancelled) at the hang-up.
      const stage = new TransformStream<Uint8Array, Uint8Array>();
      response.body.pipeTo(stage.writable, { signal: gone.signal }).catch(() => {});
      return new Response(stage.readable, {
        status: response.status,
        statusText: response.statusText,
        headers: response.headers,
      });
    },
    hangUp: () => gone.abort(),
  };
}

async function exchange(
  gw: Gateway,
  opts: SendOptions & { path: string; body: unknown; clock: VirtualClock },
): Promise<Received> {
  const { clock } = opts;
  const sentAt = clock.now();
  const leave = new AbortController();
  opts.signal?.addEventListener("abort", () => leave.abort(), { once: true });
  if (opts.leaveAfterMs !== undefined) clock.after(opts.leaveAfterMs, () => leave.abort());
  const request = new Request(`http://127.0.0.1${opts.path}`, {
    method: opts.method ?? "POST",
    headers: { "content-type": "application/json", ...opts.headers },
    body: opts.bodyStream ?? (opts.method === "GET" ? undefined : JSON.stringify(opts.body)),
    signal: leave.signal,
    ...(opts.bodyStream ? { duplex: "half" } : {}),
  } as RequestInit);
  const response = await gw.handler(request, INFO);
  const headersAt = clock.now() - sentAt;
  const pieces: Piece[] = [];
  const decoder = new TextDecoder();
  let broken = false;
  const reader = response.body?.getReader();
  if (reader) {
    const stopRead = () => void reader.cancel().catch(() => {});
    leave.signal.addEventListener("abort", stopRead, { once: true });
    if (opts.limitMs !== undefined) clock.after(opts.limitMs, stopRead);
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        pieces.push({ at: clock.now() - sentAt, text: decoder.decode(value, { stream: true }) });
        if (opts.readGapMs) await clock.sleep(opts.readGapMs);
      }
    } catch {
      broken = true;
    }
  }
  return {
    status: response.status,
    headers: response.headers,
    headersAt,
    pieces,
    text: pieces.map((p) => p.text).join(""),
    endedAt: clock.now() - sentAt,
    broken,
  };
}

/** One piece of a request body a test feeds: its bytes, this many virtual ms after sending. */
export interface BodyPiece {
  at: number;
  bytes: Uint8Array;
}

/**
 * A request body as a client sends it in virtual time (SendOptions.bodyStream): each piece at
 * its instant after the first read; then the body ends at `endAt`, or never (a client that
 * stalls) when it is undefined. Every wait is `clock` time.
 */
export function bodyOnClock(
  clock: VirtualClock,
  pieces: BodyPiece[],
  opts: { endAt?: number } = {},
): ReadableStream<Uint8Array> {
  let started: number | null = null;
  let next = 0;
  const stop = new AbortController();
  return new ReadableStream({
    async pull(controller) {
      started ??= clock.now();
      const piece = pieces[next];
      const waitTo = piece?.at ?? opts.endAt;
      if (waitTo === undefined) {
        // Stalls: nothing more until the reader gives up.
        await new Promise<void>((resolve) =>
          stop.signal.addEventListener("abort", () => resolve(), { once: true })
        );
        return;
      }
      const wait = started + waitTo - clock.now();
      if (wait > 0) await clock.sleep(wait, stop.signal).catch(() => {});
      if (stop.signal.aborted) return;
      if (!piece) return controller.close();
      next++;
      controller.enqueue(piece.bytes);
    },
    cancel() {
      stop.abort();
    },
  });
}

/**
 * Routes the global `fetch` to `v`'s handler for http://127.0.0.1 (other addresses keep the
 * real one) until disposed: for an SDK with no `fetch` option (Google's). Its calls must run
 * inside `v.run`.
 */
export function useGlobalFetch(v: VirtualGateway): Disposable {
  const real = globalThis.fetch;
  globalThis.fetch = (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    return url.startsWith("http://127.0.0.1/") ? v.fetch(input, init) : real(input, init);
  };
  return { [Symbol.dispose]: () => (globalThis.fetch = real) };
}
