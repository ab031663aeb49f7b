/**
 * A developer's tool beside the bench: what whole answers leave reachable on the heap once they
 * have ended. Runs `--count` whole answers one at a time through a fresh gateway (history on),
 * waits `--wait` ms, takes a heap snapshot (which collects everything unreachable first), and
 * prints bytes and objects per request by V8 node type and constructor against a snapshot taken
 * before them. What a finished request keeps reachable is copied by every scavenge that finds it
 * and promoted by the second, so it is what makes minor GC pauses long at one connection.
 *
 *   deno run -A bench/retained.ts [--count 2000] [--wait 0] [--top 25] [--base /other/checkout]
 *     [--during]
 *
 * `--during` takes the second snapshot while answers keep coming, one at a time, and prints the
 * whole difference: what the last moments' answers still hold, which a scavenge copies.
 */
import { benchLayout } from "./machine.ts";
import { Service } from "./services.ts";
import { MAIN_ROUTES, REPO_ROOT, startFake } from "./stack.ts";
import { gatewayConfig } from "./targets.ts";
import { heapTally } from "./heap_tally.ts";

function option(name: string, fallback: string): string {
  const at = Deno.args.indexOf(`--${name}`);
  return at >= 0 ? Deno.args[at + 1] ?? fallback : fallback;
}

const count = Number(option("count", "2000"));
const waitMs = Number(option("wait", "0"));
const top = Number(option("top", "25"));
const base = option("base", "");
/** Snapshot while requests go on (`--during`), rather than after they have ended. */
const during = Deno.args.includes("--during");

const workDir = await Deno.makeTempDir({ prefix: "pulsegate-retained-" });
const layout = await benchLayout({ cpus: navigator.hardwareConcurrency, logDir: workDir });
const fake = await startFake(layout);

async function gateway(name: string, root: string): Promise<Service> {
  const dir = `${workDir}/${name}`;
  await Deno.mkdir(dir, { recursive: true });
  const configPath = `${dir}/config.json`;
  await Deno.writeTextFile(
    configPath,
    JSON.stringify(gatewayConfig({ fake: fake.url, routes: MAIN_ROUTES })),
  );
  return await Service.start({
    name,
    cmd: [Deno.execPath(), "run", "-A", `${root}bench/gateway_entry.ts`],
    cwd: root,
    cpus: layout.proxyCpus,
    env: {
      PULSEGATE_PORT: "0",
      PULSEGATE_CONFIG: configPath,
      PULSEGATE_DB_URL: `file:${dir}/pulsegate.db`,
    },
  }, { layout, timeoutMs: 60_000 });
}

async function snapshot(control: string, file: string): Promise<void> {
  const res = await fetch(`${control}/heap/snapshot?path=${encodeURIComponent(file)}`);
  await res.body?.cancel();
}

async function measure(name: string, root: string): Promise<void> {
  const gw = await gateway(name, root);
  const control = gw.ready.control as string;
  const body = JSON.stringify({ model: "zero", messages: [{ role: "user", content: "hi" }] });
  const one = async () => {
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    await res.arrayBuffer();
  };
  for (let i = 0; i < 200; i++) await one();
  await new Promise((r) => setTimeout(r, 500));
  const before = `${workDir}/${name}-before.heapsnapshot`;
  await snapshot(control, before);
  const after = `${workDir}/${name}-after.heapsnapshot`;
  if (during) {
    // Requests keep coming while the snapshot is taken: what the last second's answers still
    // hold is in it, as it is at a scavenge.
    let going = true;
    let sent = 0;
    const loop = (async () => {
      while (going) await one().then(() => sent++);
    })();
    await new Promise((r) => setTimeout(r, 2_000));
    const at = sent;
    await snapshot(control, after);
    going = false;
    await loop;
    console.log(`${name}: snapshot after ${at} answers in 2 s, taken while they went on`);
  } else {
    for (let i = 0; i < count; i++) await one();
    if (waitMs > 0) await new Promise((r) => setTimeout(r, waitMs));
    await snapshot(control, after);
  }
  const [a, b] = [await heapTally(before), await heapTally(after)];
  const rows = [...b].map(([key, t]) => {
    const was = a.get(key) ?? { bytes: 0, count: 0 };
    const per = during ? 1 : count;
    return { key, bytes: (t.bytes - was.bytes) / per, objects: (t.count - was.count) / per };
  }).sort((x, y) => y.bytes - x.bytes);
  const total = rows.reduce((s, r) => s + r.bytes, 0);
  const objects = rows.reduce((s, r) => s + r.objects, 0);
  console.log(
    during
      ? `${name}: ${total.toFixed(0)} B and ${objects.toFixed(1)} objects more reachable while ` +
        "answers go on than before them"
      : `${name}: ${total.toFixed(0)} B and ${objects.toFixed(1)} objects reachable per ` +
        `finished request, ${waitMs} ms after ${count} whole answers`,
  );
  for (const r of rows.slice(0, top)) {
    console.log(
      `  ${r.bytes.toFixed(0).padStart(6)} B ${r.objects.toFixed(2).padStart(7)}  ${r.key}`,
    );
  }
  await gw.stop();
}

try {
  await measure("pulsegate", REPO_ROOT);
  if (base) await measure("base", base.endsWith("/") ? base : `${base}/`);
} finally {
  await fake.stop();
  await Deno.remove(workDir, { recursive: true });
}
