/**
 * A developer's tool beside the bench: the JS heap one held stream costs pulsegate, and what it is
 * made of. Holds `--count` streams through a fresh gateway (past the opening hold, so each sends
 * keep-alives), takes a heap snapshot before and while they are held, and prints the bytes and
 * objects per stream by V8 node type and constructor, most first.
 *
 *   deno run -A bench/held_heap.ts [--count 500] [--top 30] [--only PREFIX]
 *     [--base /path/to/other/checkout]
 *
 * `--base` measures that checkout's gateway too, in the same run, for a before/after;
 * `--floors` measures the floor and the JS relay floor (bench/floor_proxy.ts) the same way, for the
 * least a held stream costs on this runtime. `--only closure` keeps the rows of one node type.
 * Give a few hundred streams or more: at a few dozen, code the gateway compiles while the first
 * streams open weighs on the figure (the bench's own held-heap row reads a warm gateway instead).
 */
import { benchLayout } from "./machine.ts";
import { Service } from "./services.ts";
import { REPO_ROOT, startFake } from "./stack.ts";
import { gatewayConfig } from "./targets.ts";
import { heapTally as tally } from "./heap_tally.ts";

function option(name: string, fallback: string): string {
  const at = Deno.args.indexOf(`--${name}`);
  return at >= 0 ? Deno.args[at + 1] ?? fallback : fallback;
}

const count = Number(option("count", "500"));
const top = Number(option("top", "30"));
const base = option("base", "");
const floors = Deno.args.includes("--floors");
/** The hold (15 s) becomes 1.5 s. */
const TIME_SCALE = 0.1;
const HELD_MODE = "held-60000-1-10";

const workDir = await Deno.makeTempDir({ prefix: "pulsegate-held-heap-" });
const layout = await benchLayout({ cpus: navigator.hardwareConcurrency, logDir: workDir });
const fake = await startFake(layout);

async function gateway(name: string, root: string): Promise<Service> {
  const dir = `${workDir}/${name}`;
  await Deno.mkdir(dir, { recursive: true });
  const configPath = `${dir}/config.json`;
  const config = gatewayConfig({ fake: fake.url, routes: { held: HELD_MODE } });
  await Deno.writeTextFile(configPath, JSON.stringify(config));
  return await Service.start({
    name,
    cmd: [Deno.execPath(), "run", "-A", `${root}bench/gateway_entry.ts`],
    cwd: root,
    cpus: layout.proxyCpus,
    env: {
      PULSEGATE_PORT: "0",
      // The held scenario opens 5,000 client connections; the default cap is 4,096
      // (docs/deploy.md "Connection limits").
      PULSEGATE_MAX_CONNECTIONS: "20000",
      PULSEGATE_CONFIG: configPath,
      PULSEGATE_DB_URL: `file:${dir}/pulsegate.db`,
      PULSEGATE_TIME_SCALE: String(TIME_SCALE),
    },
  }, { layout, timeoutMs: 60_000 });
}

async function floor(name: string, mode: "pass" | "js"): Promise<Service> {
  return await Service.start({
    name,
    cmd: [Deno.execPath(), "run", "-A", `${REPO_ROOT}bench/floor_proxy.ts`],
    cpus: layout.proxyCpus,
    env: {
      BENCH_UPSTREAM: `${fake.url}/${HELD_MODE}`,
      BENCH_FLOOR_MODE: mode,
      BENCH_FLOOR_CONTROL: "1",
    },
  }, { layout, timeoutMs: 60_000 });
}

async function snapshot(control: string, file: string): Promise<void> {
  const res = await fetch(`${control}/heap/snapshot?path=${encodeURIComponent(file)}`);
  await res.body?.cancel();
}

async function inflight(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/^pulsegate_inflight_requests (\d+)/m.exec(text)?.[1] ?? NaN);
}

async function measure(name: string, start: () => Promise<Service>): Promise<void> {
  const gw = await start();
  const control = gw.ready.control as string;
  const body = JSON.stringify({
    model: "held",
    stream: true,
    messages: [{ role: "user", content: "hi" }],
  });
  const open = () =>
    fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
  // Warm every path once, so the snapshots differ by the held streams alone.
  for (const res of await Promise.all([open(), open()])) await res.body?.cancel();
  await new Promise((r) => setTimeout(r, 500));
  const before = `${workDir}/${name}-before.heapsnapshot`;
  await snapshot(control, before);
  const held = await Promise.all(Array.from({ length: count }, open));
  const readers = held.map((res) => res.body!.getReader());
  // Past the opening hold: every stream has its headers and its first keep-alive.
  // The floors pass the fake's headers on at once and have nothing to hold.
  if (!name.startsWith("floor")) await Promise.all(readers.map((r) => r.read()));
  else await new Promise((r) => setTimeout(r, 500));
  if (!name.startsWith("floor")) {
    while ((await inflight(gw.url)) < count) await new Promise((r) => setTimeout(r, 100));
  }
  const during = `${workDir}/${name}-held.heapsnapshot`;
  await snapshot(control, during);
  const [a, b] = [await tally(before), await tally(during)];
  const rows = [...b].map(([key, t]) => {
    const was = a.get(key) ?? { bytes: 0, count: 0 };
    return { key, bytes: (t.bytes - was.bytes) / count, objects: (t.count - was.count) / count };
  }).sort((x, y) => y.bytes - x.bytes);
  const total = rows.reduce((s, r) => s + r.bytes, 0);
  const objects = rows.reduce((s, r) => s + r.objects, 0);
  const closures = rows.filter((r) => r.key.startsWith("closure")).reduce(
    (s, r) => s + r.objects,
    0,
  );
  const promises = rows.find((r) => r.key === "object Promise")?.objects ?? 0;
  console.log(
    `${name}: ${(total / 1024).toFixed(1)} KiB per held stream; ${objects.toFixed(0)} objects, ` +
      `${closures.toFixed(0)} closures, ${promises.toFixed(0)} promises`,
  );
  const only = option("only", "");
  for (const r of rows.filter((r) => !only || r.key.startsWith(only)).slice(0, top)) {
    console.log(
      `  ${r.bytes.toFixed(0).padStart(6)} B ${r.objects.toFixed(1).padStart(6)}  ${r.key}`,
    );
  }
  for (const r of readers) void r.cancel().catch(() => {});
  await gw.stop();
}

try {
  await measure("pulsegate", () => gateway("pulsegate", REPO_ROOT));
  if (base) {
    const root = base.endsWith("/") ? base : `${base}/`;
    await measure("base", () => gateway("base", root));
  }
  if (floors) {
    await measure("floor", () => floor("floor", "pass"));
    await measure("floor_js", () => floor("floor_js", "js"));
  }
} finally {
  await fake.stop();
}
