/**
 * The processes a run measures: the fake upstream on the load cores, and each proxy on the
 * proxy cores, every one its own process. Idle proxies cost nothing while another is measured.
 */
import type { FloorMode } from "./floor_proxy.ts";
import type { NodeTools } from "./npm_tools.ts";
import { freePort, type Layout, Service } from "./services.ts";
import { type Endpoints, type FakeMode, gatewayConfig, type TargetId } from "./targets.ts";

export const BENCH_DIR = new URL(".", import.meta.url).pathname;
export const REPO_ROOT = new URL("..", import.meta.url).pathname;

/** Every route the main gateways serve: route name -> fake mode. */
export const MAIN_ROUTES: Record<string, FakeMode> = {
  zero: "zero",
  delay20: "delay20",
  stream64: "stream64",
};

export interface Stack {
  endpoints: Endpoints;
  fake: Service;
  proxies: Partial<Record<TargetId, Service>>;
  /** The bench-only control port of each pulsegate process (stats, probe). */
  controls: Partial<Record<TargetId, string>>;
  skipped: Array<{ target: TargetId; reason: string }>;
  stop(): Promise<void>;
}

function deno(script: string, flags: string[] = []): string[] {
  return [Deno.execPath(), "run", "-A", ...flags, `${BENCH_DIR}${script}`];
}

export function startFake(layout: Layout): Promise<Service> {
  return Service.start(
    { name: "fake_upstream", cmd: deno("fake_upstream.ts"), cpus: layout.loadCpus },
    { layout },
  );
}

/** The floor proxy; `mode: "js"` is its JS relay variant (see floor_proxy.ts). */
export function startFloor(
  layout: Layout,
  opts: { fake: string; name?: string; mode?: FloorMode },
): Promise<Service> {
  const mode = opts.mode ?? "pass";
  return Service.start({
    name: opts.name ?? (mode === "js" ? "floor_js" : "floor"),
    cmd: deno("floor_proxy.ts"),
    cpus: layout.proxyCpus,
    env: { BENCH_UPSTREAM: opts.fake, BENCH_FLOOR_MODE: mode },
  }, { layout });
}

/** A pulsegate process of its own, on a fresh database in `dir`. */
export async function startPulsegate(
  layout: Layout,
  opts: {
    name: string;
    dir: string;
    config: Record<string, unknown>;
    history: boolean;
    timeScale?: number;
    /** Extra `deno run` flags, e.g. V8 flags for an experiment. */
    denoFlags?: string[];
    /** More environment, over the defaults below (a fixed port, a fleet's peer settings). */
    env?: Record<string, string>;
  },
): Promise<Service> {
  await Deno.mkdir(opts.dir, { recursive: true });
  const configPath = `${opts.dir}/config.json`;
  await Deno.writeTextFile(configPath, JSON.stringify(opts.config));
  return await Service.start({
    name: opts.name,
    cmd: deno("gateway_entry.ts", opts.denoFlags),
    cwd: REPO_ROOT,
    cpus: layout.proxyCpus,
    env: {
      PULSEGATE_PORT: "0",
      // The held scenario opens 5,000 client connections; the default cap is 4,096
      // (docs/deploy.md "Connection limits").
      PULSEGATE_MAX_CONNECTIONS: "20000",
      PULSEGATE_CONFIG: configPath,
      PULSEGATE_DB_URL: `file:${opts.dir}/pulsegate.db`,
      PULSEGATE_TIME_SCALE: String(opts.timeScale ?? 1),
      BENCH_HISTORY: opts.history ? "on" : "off",
      BENCH_PROBE_MS: "5",
      ...opts.env,
    },
  }, { layout, timeoutMs: 60_000 });
}

export function startPortkey(layout: Layout, opts: { tools: NodeTools }): Promise<Service> {
  const script = opts.tools.portkey;
  if (!script) throw new Error("Portkey is not installed");
  const port = freePort();
  return Service.start({
    name: "portkey",
    cmd: [opts.tools.node, script, `--port=${port}`, "--headless"],
    cpus: layout.proxyCpus,
    env: { NODE_ENV: "production" },
    readyWhen: { pattern: /Ready for connections/, url: `http://127.0.0.1:${port}` },
  }, { layout });
}

export async function startStack(
  layout: Layout,
  opts: { tools: NodeTools; workDir: string },
): Promise<Stack> {
  const fake = await startFake(layout);
  const proxies: Partial<Record<TargetId, Service>> = {};
  const skipped: Stack["skipped"] = [];
  const endpoints: Endpoints = { fake: fake.url };
  const controls: Partial<Record<TargetId, string>> = {};
  const config = gatewayConfig({ fake: fake.url, routes: MAIN_ROUTES });
  proxies.floor = await startFloor(layout, { fake: fake.url });
  proxies.floor_js = await startFloor(layout, { fake: fake.url, mode: "js" });
  for (const [target, history] of [["pulsegate", true], ["pulsegate_no_history", false]] as const) {
    const gw = await startPulsegate(layout, {
      name: target,
      dir: `${opts.workDir}/${target}`,
      config,
      history,
    });
    proxies[target] = gw;
    controls[target] = gw.ready.control;
  }
  if (opts.tools.portkey) {
    try {
      proxies.portkey = await startPortkey(layout, { tools: opts.tools });
    } catch (err) {
      skipped.push({ target: "portkey", reason: `did not start: ${(err as Error).message}` });
    }
  } else {
    skipped.push({
      target: "portkey",
      reason: opts.tools.problems.join("; ") || "not installed (quick runs do not install it)",
    });
  }
  for (const [id, service] of Object.entries(proxies)) {
    endpoints[id as TargetId] = service.url;
  }
  return {
    endpoints,
    fake,
    proxies,
    controls,
    skipped,
    async stop() {
      await Promise.all(Object.values(proxies).map((s) => s.stop()));
      await fake.stop();
    },
  };
}
