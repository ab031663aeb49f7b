import OpenAI from "openai";
import type { AttemptRecord, RequestRecord } from "../db/records.ts";
import { getRequest, listAttempts } from "../db/history_queries.ts";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { readSettings } from "../gateway/start/settings.ts";
import { type Gateway, startGateway } from "../gateway/start/start_gateway.ts";
import { type FakeUpstream, startFakeUpstream } from "./fake_upstreams/server.ts";
import { freshDatabase } from "./fresh_database.ts";

/** Scale used by the end-to-end suites: a 30 s idle timeout lasts 300 ms. */
export const TEST_SCALE = 0.01;

/** `await using gw = await startTestGateway(...)` stops it when the test's scope ends. */
export interface TestGateway extends Gateway, AsyncDisposable {
  dir: string;
  stop(): Promise<void>;
  /** Waits until history rows are written, then reads one request and its hops. */
  row(id: string): Promise<{ request: RequestRecord; attempts: AttemptRecord[] }>;
  openai(opts?: { apiKey?: string; maxRetries?: number; timeout?: number }): OpenAI;
}

export async function startTestGateway(
  config: ConfigInput | undefined,
  opts: {
    scale?: number;
    env?: Record<string, string>;
    dir?: string;
    host?: string;
    /** Default 0: any free port. */
    port?: number;
    metricsOpen?: boolean;
    /** Bound on history rows kept in memory while the database is away (default 100 000). */
    historyMemoryRows?: number;
    /**
     * Write history on a worker thread, as a served gateway does; by default the suites write on
     * their own thread (`historyThread` in gateway/start/start_gateway.ts) and the worker is
     * tested on its own (db/history_worker_test.ts) and in every spawned gateway.
     */
    historyWorker?: boolean;
    /** The pools' randomness (default Math.random): seed it for figures that hold on every run. */
    random?: () => number;
  } = {},
): Promise<TestGateway> {
  const dir = opts.dir ?? await Deno.makeTempDir({ prefix: "pulsegate-test-" });
  if (opts.dir === undefined) await freshDatabase(`${dir}/pulsegate.db`);
  const env = (name: string) => opts.env?.[name];
  const settings = {
    ...readSettings(env),
    host: opts.host ?? "127.0.0.1",
    port: opts.port ?? 0,
    dbUrl: `file:${dir}/pulsegate.db`,
    timeScale: opts.scale ?? TEST_SCALE,
  };
  const gw = await startGateway({
    settings,
    env,
    configFile: config,
    quiet: true,
    metricsOpen: opts.metricsOpen ?? true,
    historyMemoryRows: opts.historyMemoryRows,
    historyThread: opts.historyWorker ? "worker" : "this",
    random: opts.random,
  });
  return {
    ...gw,
    dir,
    stop: () => gw.shutdown(),
    [Symbol.asyncDispose]: () => gw.shutdown(),
    async row(id) {
      // A deadline, not a count of rounds: a round's length is the scheduler's, not ours.
      const deadline = Date.now() + 10_000;
      for (;;) {
        await gw.writer.flush();
        const request = await getRequest(gw.db, id);
        if (request && request.state !== "open") {
          return { request, attempts: await listAttempts(gw.db, id) };
        }
        if (Date.now() > deadline) throw new Error(`request ${id} was never recorded as ended`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    openai: (o = {}) =>
      new OpenAI({
        baseURL: `${gw.url}/v1`,
        apiKey: o.apiKey ?? "unused",
        maxRetries: o.maxRetries ?? 0,
        timeout: o.timeout,
      }),
  };
}

/** A port free right now, for a gateway that must know its own address before it starts. */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/** A one-route config over the given chat upstream URLs, in order. */
export function chatRoute(
  urls: string[],
  opts: { failover?: ConfigInput["failover"]; model?: string } = {},
): ConfigInput {
  return {
    failover: opts.failover,
    upstreams: urls.map((url, i) => ({
      id: `up${i + 1}`,
      kind: "openai-chat" as const,
      base_url: url,
    })),
    routes: [{
      model: opts.model ?? "smart",
      candidates: urls.map((_, i) => ({ upstream: `up${i + 1}`, model: `model-${i + 1}` })),
    }],
  };
}

export function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

/**
 * Polls `check` every 5 ms until it answers true; throws, naming `what`, after `ms`. The
 * deadline is generous: a passing check returns at once, so it costs nothing. The one way the
 * real-time suites wait for something to happen.
 */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  opts: { what?: string; ms?: number } = {},
): Promise<void> {
  const deadline = Date.now() + (opts.ms ?? 10_000);
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not met in time: ${opts.what ?? "condition"}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * A gateway over `upstreams` fake upstreams (default one), stopped with them when `run` ends.
 * The config defaults to one chat route over the fakes in order (`chatRoute`).
 */
export async function withGateway(
  run: (gw: TestGateway, ups: FakeUpstream[]) => Promise<void>,
  opts: {
    upstreams?: number;
    config?: (urls: string[]) => ConfigInput | undefined;
    failover?: ConfigInput["failover"];
    env?: Record<string, string>;
    scale?: number;
    dir?: string;
    historyWorker?: boolean;
  } = {},
): Promise<void> {
  const ups = Array.from({ length: opts.upstreams ?? 1 }, () => startFakeUpstream());
  try {
    const urls = ups.map((u) => u.url);
    const config = opts.config ? opts.config(urls) : chatRoute(urls, { failover: opts.failover });
    await using gw = await startTestGateway(config, opts);
    await run(gw, ups);
  } finally {
    for (const up of ups) await up.close();
  }
}
