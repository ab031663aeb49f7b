/**
 * A developer's tool beside the bench: how much of the young generation survives each scavenge
 * (and is promoted to the old one) when a process relays whole answers one at a time, by how the
 * upstream body is read. A scavenge's pause grows with what it copies, so a steady survival is
 * the one-caller tail's GC share (docs/performance_log.md "Scavenges and the fetch body").
 *
 *   deno run -A bench/gc_promotion.ts [--requests 20000] [--modes text,byob,reader,pulsegate]
 *
 * Each mode is a process of its own on the proxy's CPU, run with `--trace-gc-nvp`, sending
 * `--requests` answers one at a time to the bench's fake upstream (route `zero`):
 * - `text`, `byob`, `reader`: a bare loop of `fetch` and the body read with `Response.text()`,
 *   a BYOB reader into one reused buffer, or a default reader;
 * - `pulsegate`: a gateway (bench/gateway_entry.ts, history on) between this process and the fake.
 * The first three scavenges (start-up) are left out.
 */
import { benchLayout } from "./machine.ts";
import { MAIN_ROUTES, startFake } from "./stack.ts";
import { gatewayConfig } from "./targets.ts";

function option(name: string, fallback: string): string {
  const at = Deno.args.indexOf(`--${name}`);
  return at >= 0 ? Deno.args[at + 1] ?? fallback : fallback;
}

const requests = Number(option("requests", "20000"));
const BODY = JSON.stringify({ model: "zero", messages: [{ role: "user", content: "hi" }] });
const INIT = { method: "POST", headers: { "content-type": "application/json" }, body: BODY };

/** The child: `--child MODE --url URL` reads `requests` answers the way MODE names. */
async function child(mode: string, url: string): Promise<void> {
  let buffer = new Uint8Array(4096);
  for (let i = 0; i < requests; i++) {
    const res = await fetch(url, INIT);
    if (mode === "text") await res.text();
    else if (mode === "byob") {
      const reader = res.body!.getReader({ mode: "byob" });
      for (;;) {
        const { done, value } = await reader.read(buffer);
        if (value) buffer = new Uint8Array(value.buffer);
        if (done) break;
      }
    } else {
      const reader = res.body!.getReader();
      while (!(await reader.read()).done) { /* to its end */ }
    }
  }
}

interface Scavenges {
  count: number;
  pauseMs: number;
  promotedMiB: number;
  survivedMiB: number;
}

/** Mean pause, promoted and survived bytes of the main isolate's scavenges in `--trace-gc-nvp` output. */
function scavenges(out: string): Scavenges {
  const rows: Array<Record<string, number>> = [];
  for (const line of out.split("\n")) {
    if (!line.includes('"gc":"s"')) continue;
    try {
      // The isolate with the largest young generation is the serving thread, not a worker's.
      const json = [...line.slice(line.indexOf("{"))].filter((c) => c >= " ").join("");
      const row = JSON.parse(json);
      rows.push(row);
    } catch { /* a line cut by another thread's output */ }
  }
  const main = rows.filter((r) => (r.new_space_capacity ?? 0) >= 2 ** 21).slice(3);
  const mean = (f: (r: Record<string, number>) => number) =>
    main.reduce((s, r) => s + f(r), 0) / Math.max(1, main.length);
  return {
    count: main.length,
    pauseMs: mean((r) => r.pause ?? 0),
    promotedMiB: mean((r) => r.promoted ?? 0) / 2 ** 20,
    survivedMiB: mean((r) => r.new_space_survived ?? 0) / 2 ** 20,
  };
}

function run(
  cmd: string[],
  opts: { cpus: string | null; env?: Record<string, string> },
): Deno.Command {
  const pin = opts.cpus ? ["taskset", "-c", opts.cpus] : [];
  return new Deno.Command(pin[0] ?? cmd[0]!, {
    args: [...pin.slice(1), ...(pin.length ? cmd : cmd.slice(1))],
    env: opts.env,
    stdout: "piped",
    stderr: "null",
  });
}

async function measureLoop(mode: string, opts: { url: string; cpus: string | null }) {
  const cmd = run([
    Deno.execPath(),
    "run",
    "-A",
    "--v8-flags=--trace-gc-nvp",
    new URL(import.meta.url).pathname,
    "--child",
    mode,
    "--url",
    opts.url,
    "--requests",
    String(requests),
  ], { cpus: opts.cpus });
  const out = await cmd.output();
  return scavenges(new TextDecoder().decode(out.stdout));
}

async function measureGateway(opts: { fake: string; cpus: string | null; dir: string }) {
  const config = `${opts.dir}/config.json`;
  await Deno.writeTextFile(
    config,
    JSON.stringify(gatewayConfig({ fake: opts.fake, routes: MAIN_ROUTES })),
  );
  const cmd = run([
    Deno.execPath(),
    "run",
    "-A",
    "--v8-flags=--trace-gc-nvp",
    new URL("./gateway_entry.ts", import.meta.url).pathname,
  ], {
    cpus: opts.cpus,
    env: {
      PULSEGATE_PORT: "0",
      PULSEGATE_CONFIG: config,
      PULSEGATE_DB_URL: `file:${opts.dir}/pulsegate.db`,
    },
  });
  const gateway = cmd.spawn();
  const lines = gateway.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  let url = "";
  while (!url) {
    const { value, done } = await lines.read();
    if (done) throw new Error(`the gateway exited before it was ready:\n${out.slice(-2000)}`);
    out += value;
    url = /\{"url":"([^"]+)"/.exec(out)?.[1] ?? "";
  }
  const rest = (async () => {
    for (let r = await lines.read(); !r.done; r = await lines.read()) out += r.value;
  })();
  for (let i = 0; i < requests; i++) {
    const res = await fetch(`${url}/v1/chat/completions`, INIT);
    await res.arrayBuffer();
  }
  gateway.kill("SIGTERM");
  await gateway.status;
  await rest;
  return scavenges(out);
}

if (Deno.args.includes("--child")) {
  await child(option("child", "text"), option("url", ""));
} else {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-gc-promotion-" });
  const layout = await benchLayout({ cpus: navigator.hardwareConcurrency, logDir: dir });
  const fake = await startFake(layout);
  try {
    const modes = option("modes", "text,byob,reader,pulsegate").split(",");
    console.log(`${requests} whole answers one at a time per mode; means per scavenge`);
    for (const mode of modes) {
      const s = mode === "pulsegate"
        ? await measureGateway({ fake: fake.url, cpus: layout.proxyCpus, dir })
        : await measureLoop(mode, {
          url: `${fake.url}/zero/v1/chat/completions`,
          cpus: layout.proxyCpus,
        });
      console.log(
        `${mode.padEnd(10)} scavenges ${String(s.count).padStart(4)}  pause ` +
          `${s.pauseMs.toFixed(2)} ms  survived ${s.survivedMiB.toFixed(2)} MiB  promoted ` +
          `${s.promotedMiB.toFixed(2)} MiB`,
      );
    }
  } finally {
    await fake.stop();
    await Deno.remove(dir, { recursive: true });
  }
}
