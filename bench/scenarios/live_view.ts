/**
 * Scenario 8: the admin page's live view at scale (docs/scaling.md "The live list of a fleet").
 * `streams` long healthy streams (the fake sends one piece every 10 s) held on one gateway
 * process, then on two processes sharing one database (the documented fleet setup: public URL
 * and peer secret), half on each. For each: the bytes one tab's feed receives per tick, the
 * gateways' CPU per open tab and `/healthz` p99 with three tabs open against none, each tab's
 * share of its main thread in long tasks, and the time to find one request by search on the
 * first instance (on the other instance, in a fleet) and abort it in the page. The tabs are
 * Chromium's (playwright-core), when /usr/bin/chromium is there and the profile asks for them.
 */
import type { Browser, Page } from "playwright-core";
import type { LiveSnapshot } from "../../admin/api_types.ts";
import { createSseParser } from "../../admin/client/sse_parser.ts";
import type { BenchContext } from "../context.ts";
import { loadJob } from "../context.ts";
import type { LiveStreamsJob, LiveStreamsResult } from "../load/live_streams.ts";
import type { LiveViewCase, LiveViewResult } from "../results.ts";
import { freePort, type Service } from "../services.ts";
import { startPulsegate } from "../stack.ts";
import { round, summarize } from "../stats.ts";
import { gatewayConfig } from "../targets.ts";

const CHROMIUM = "/usr/bin/chromium";
/** One piece every 10 s, for ten minutes: healthy streams that stay for the whole case. */
const MODE = "held-0-60-10000";
const TABS = 3;
/** A task over this long is a long task (the Long Tasks API's own threshold). */
const LONG_TASK_MS = 50;

export async function liveView(ctx: BenchContext): Promise<LiveViewResult> {
  const p = ctx.profile.liveView;
  const hasChromium = p.browser && await Deno.stat(CHROMIUM).then(() => true, () => false);
  const cases: LiveViewCase[] = [];
  // Launched before any stream is held: launched by this process once thousands were held, in
  // two runs no Chromium process ever started (Deno 2.9.6, playwright-core 1.65.1), while another
  // process launched it in about a second at the same moment.
  const browser = hasChromium
    ? await import("../../tests/browser_child.ts").then((m) => m.launchChromium())
    : null;
  try {
    for (const instances of [1, 2]) {
      cases.push(await runCase(ctx, { instances, browser }));
    }
  } finally {
    await browser?.close();
  }
  return {
    windowSeconds: p.windowSeconds,
    tabs: TABS,
    browser: hasChromium ? "Chromium (playwright-core), headless" : null,
    cases,
  };
}

async function runCase(
  ctx: BenchContext,
  opts: { instances: number; browser: Browser | null },
): Promise<LiveViewCase> {
  const p = ctx.profile.liveView;
  const name = `live_view_${opts.instances}`;
  const dir = `${ctx.workDir}/${name}`;
  const config = gatewayConfig({ fake: ctx.stack.fake.url, routes: { held: MODE } });
  const gateways: Service[] = [];
  const ports = Array.from({ length: opts.instances }, () => freePort());
  const fleet = opts.instances > 1;
  for (const [i, port] of ports.entries()) {
    gateways.push(
      await startPulsegate(ctx.layout, {
        name: `${name}_${i}`,
        dir,
        config,
        history: true,
        env: {
          PULSEGATE_PORT: String(port),
          ...(fleet
            ? {
              PULSEGATE_PUBLIC_URL: `http://127.0.0.1:${port}`,
              PULSEGATE_PEER_SECRET: "bench-fleet-secret",
            }
            : {}),
        },
      }),
    );
  }
  const urls = gateways.map((g) => g.url);
  const [first] = urls as [string];
  const stopFile = `${dir}/stop`;
  const body = JSON.stringify({
    model: "held",
    stream: true,
    messages: [{ role: "user", content: "hold" }],
  });
  const job: LiveStreamsJob = {
    urls,
    count: p.streams,
    openPerSecond: p.openPerSecond,
    body,
    prefix: "lv",
    stopFile,
    maxHoldMs: 600_000,
  };
  ctx.log(`live view: ${p.streams} streams on ${opts.instances} process(es)`);
  const load = loadJob<LiveStreamsResult>(ctx, {
    script: "live_streams.ts",
    job,
    timeoutMs: 700_000,
  });
  const pages: Page[] = [];
  try {
    const running = await allRunning(first, { count: p.streams, load });
    ctx.log(`live view: ${running} running; no tab`);
    const windowMs = p.windowSeconds * 1000;
    const cpu = () => Promise.all(gateways.map((g) => g.cpuMs())).then((t) => sum(t));

    // No tab: the gateways' CPU and /healthz alone.
    const cpu0 = await cpu();
    const started0 = performance.now();
    const healthNone = await healthz(first, windowMs);
    const cpuNone = (await cpu() - cpu0) / (performance.now() - started0);

    // Three tabs: Chromium's when there is one, else three raw feeds.
    let cpuTabs: number;
    let healthTabs: number[];
    let longTaskShare: number | null = null;
    let findAndAbortMs: number | null = null;
    if (opts.browser) {
      ctx.log("live view: three Chromium tabs");
      for (let i = 0; i < TABS; i++) pages.push(await openTab(opts.browser, first));
      const cpu1 = await cpu();
      const started1 = performance.now();
      const [health, ...shares] = await Promise.all([
        healthz(first, windowMs),
        ...pages.map((page) => longTasks(page, windowMs)),
      ]);
      cpuTabs = (await cpu() - cpu1) / (performance.now() - started1);
      healthTabs = health as number[];
      longTaskShare = round(Math.max(...(shares as number[])), 3);
      // A stream on the last instance: in a fleet, one the first instance does not run.
      const n = opts.instances;
      const target = `lv-${p.streams - 1 - ((p.streams - n) % n)}`;
      ctx.log(`live view: find and abort ${target}`);
      findAndAbortMs = await findAndAbort(pages[0]!, target);
    } else {
      const feeds = Array.from({ length: TABS }, () => new AbortController());
      const reading = feeds.map((f) => feedBytes(first, { ms: windowMs * 2, signal: f.signal }));
      const cpu1 = await cpu();
      const started1 = performance.now();
      healthTabs = await healthz(first, windowMs);
      cpuTabs = (await cpu() - cpu1) / (performance.now() - started1);
      for (const f of feeds) f.abort();
      await Promise.all(reading);
    }
    ctx.log("live view: one feed's bytes");
    const bytes = await feedBytes(first, { ms: windowMs });
    await Deno.writeTextFile(stopFile, "");
    const held = await load;
    const perTick = bytes.sizes.length ? summarize(bytes.sizes) : null;
    return {
      label: fleet ? `${opts.instances} processes × ${p.streams / opts.instances}` : "1 process",
      instances: opts.instances,
      streams: p.streams,
      running,
      bytesPerTick: {
        mean: perTick ? Math.round(perTick.mean) : 0,
        max: perTick ? perTick.max : 0,
        ticks: bytes.sizes.length,
        heartbeats: bytes.heartbeats,
      },
      cpuPercentPerTab: round(Math.max(0, (cpuTabs - cpuNone) * 100 / TABS), 2),
      cpuPercentNoTab: round(cpuNone * 100, 2),
      healthzP99Ms: {
        none: round(summarize(healthNone).p99, 2),
        threeTabs: round(summarize(healthTabs).p99, 2),
      },
      longTaskShare,
      findAndAbortMs: findAndAbortMs === null ? null : Math.round(findAndAbortMs),
      errors: held.errors,
      errorExamples: held.errorExamples,
    };
  } finally {
    for (const page of pages) await page.context().close();
    await Deno.writeTextFile(stopFile, "").catch(() => {});
    await load.catch(() => {});
    await Promise.all(gateways.map((g) => g.stop()));
  }
}

function sum(values: number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

/**
 * Waits until the gateways count every stream as running, or nine in ten of them with no new one
 * for 5 s (a stream that failed to open is counted in the load job's errors);
 * answers the count then.
 */
async function allRunning(
  url: string,
  opts: { count: number; load: Promise<unknown> },
): Promise<number> {
  let failed: unknown = null;
  opts.load.catch((err) => (failed = err));
  let running = 0;
  let steady = 0;
  for (let i = 0; i < 1200; i++) {
    if (failed) throw failed;
    const res = await fetch(`${url}/admin/api/live/snapshot?limit=1`);
    const snap = await res.json() as LiveSnapshot;
    steady = snap.totals.running === running ? steady + 1 : 0;
    running = snap.totals.running;
    if (snap.instances.silent.length === 0) {
      if (running >= opts.count) return running;
      if (running >= opts.count * 0.9 && steady >= 20) return running;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`only ${running} of ${opts.count} streams were ever running`);
}

/** `/healthz` one call after another for `ms`: each call's latency. */
async function healthz(url: string, ms: number): Promise<number[]> {
  const times: number[] = [];
  const until = performance.now() + ms;
  while (performance.now() < until) {
    const started = performance.now();
    await (await fetch(`${url}/healthz`)).arrayBuffer();
    times.push(performance.now() - started);
    await new Promise((r) => setTimeout(r, 20));
  }
  return times;
}

/** One feed's events for `ms`: each event's bytes (snapshots and heartbeats alike). */
async function feedBytes(
  url: string,
  opts: { ms: number; signal?: AbortSignal },
): Promise<{ sizes: number[]; heartbeats: number }> {
  const stop = new AbortController();
  opts.signal?.addEventListener("abort", () => stop.abort(), { once: true });
  const timer = setTimeout(() => stop.abort(), opts.ms);
  const sizes: number[] = [];
  let heartbeats = 0;
  const encoder = new TextEncoder();
  const parse = createSseParser((e) => {
    // The event as sent: its name and data lines and the blank line after.
    sizes.push(encoder.encode(`event: ${e.event}\ndata: ${e.data}\n\n`).length);
    if (e.event === "heartbeat") heartbeats++;
  });
  try {
    const res = await fetch(`${url}/admin/api/live`, { signal: stop.signal });
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parse(value);
    }
  } catch {
    // The window closed.
  } finally {
    clearTimeout(timer);
  }
  return { sizes, heartbeats };
}

/** A tab on /admin (loopback with no token: no sign-in) once its live list shows rows. */
async function openTab(browser: Browser, url: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1180, height: 900 } });
  const page = await context.newPage();
  await page.addInitScript(() => {
    const w = window as unknown as { longTasks: number[][] };
    w.longTasks = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) w.longTasks.push([e.startTime, e.duration]);
    }).observe({ type: "longtask", buffered: true });
  });
  await page.goto(`${url}/admin`);
  await page.locator("#live tbody tr").first().waitFor({ timeout: 60_000 });
  return page;
}

/** The share of the page's main thread in long tasks over the next `ms`. */
async function longTasks(page: Page, ms: number): Promise<number> {
  const from = await page.evaluate(() => performance.now());
  await new Promise((r) => setTimeout(r, ms));
  const to = await page.evaluate(() => performance.now());
  const tasks = await page.evaluate(() =>
    (window as unknown as { longTasks: number[][] }).longTasks
  );
  const busy = tasks
    .filter(([start, duration]) => duration! > LONG_TASK_MS && start! >= from && start! < to)
    .reduce((total, [, duration]) => total + duration!, 0);
  return busy / (to - from);
}

/** From typing the id in Search to the abort's result on the page, in ms. */
async function findAndAbort(page: Page, id: string): Promise<number> {
  const started = performance.now();
  await page.getByLabel("Search").fill(id);
  const row = page.locator(`#live tr[data-request-id="${id}"]`);
  await row.getByRole("button", { name: `Abort request ${id}` }).click({ timeout: 30_000 });
  await page.locator("#live").getByRole("alertdialog")
    .getByRole("button", { name: `Abort request ${id}` }).click({ timeout: 30_000 });
  await page.locator("#live .notice.ok").waitFor({ timeout: 30_000 });
  return performance.now() - started;
}
