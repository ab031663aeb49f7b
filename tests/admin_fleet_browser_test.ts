/**
 * The live list of a fleet in headless Chromium (docs/admin.md "Live requests", docs/scaling.md
 * "The live list of a fleet"): two gateway processes on one database file, at the real time
 * scale, each with the public URL and peer secret of the documented fleet setup. Streams on both
 * are listed on either page; a search by id finds a stream on the other process and aborts it;
 * a peer that hangs is shown as not answering while the list still updates; the gateway filters
 * and pages, so a tab's bytes per tick follow the page.
 *
 * Like tests/admin_browser_test.ts, under the suite this file runs itself again in a child
 * `deno test --allow-all` (playwright-core needs it); only the child imports playwright.
 */
import assert from "node:assert/strict";
import type { Browser, Page } from "playwright-core";
import type { LiveSnapshot } from "../admin/api_types.ts";
import { createSseParser } from "../admin/client/sse_parser.ts";
import { contentThenSilence } from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";
import { browserTest, launchChromium } from "./browser_child.ts";
import { freePort, postJson } from "./harness.ts";
import { type SpawnedGateway, spawnGateway, startHungPeer } from "./spawn_gateway.ts";

const WAIT = { timeout: 15_000 };
const TOKEN = "fleet-admin";
const ADMIN = { authorization: `Bearer ${TOKEN}` };

async function startInstance(dir: string, opts: { config?: string }): Promise<SpawnedGateway> {
  const port = freePort();
  const url = `http://127.0.0.1:${port}`;
  return await spawnGateway(dir, {
    env: {
      PULSEGATE_PORT: String(port),
      PULSEGATE_PUBLIC_URL: url,
      PULSEGATE_TIME_SCALE: "1",
      PULSEGATE_ADMIN_TOKEN: TOKEN,
      PULSEGATE_PEER_SECRET: "fleet-peer-secret",
      ...(opts.config ? { PULSEGATE_CONFIG: opts.config } : {}),
    },
  });
}

/** A stream held open after its first content; `rest` is all the caller read once it ends. */
async function hold(url: string, id: string): Promise<{ rest: Promise<string> }> {
  const body = { model: "smart", stream: true, messages: [{ role: "user", content: "hi" }] };
  const res = await postJson(`${url}/v1/chat/completions`, body, { "x-request-id": id });
  assert.equal(res.status, 200, id);
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("partial")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`${id} ended early: ${text}`);
    text += value;
  }
  const rest = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return text;
      text += value;
    }
  })();
  return { rest };
}

async function snapshot(url: string, query = ""): Promise<LiveSnapshot> {
  const res = await fetch(`${url}/admin/api/live/snapshot${query}`, { headers: ADMIN });
  assert.equal(res.status, 200);
  return await res.json();
}

/**
 * What `ask` answers once the instances named answer it. The peer bound is real time
 * (LIVE_PEER_ANSWER_MS): a peer that misses it is left out for LIVE_PEER_QUIET_MS and shown as
 * silent, a promise admin/live_fleet_test.ts holds on the virtual clock and not what these steps
 * ask about.
 */
async function onceAnswered<T>(
  ask: () => Promise<T>,
  opts: { silent: (answer: T) => string[]; instances: string[] },
): Promise<T> {
  const until = Date.now() + WAIT.timeout;
  for (;;) {
    const answer = await ask();
    const silent = opts.silent(answer);
    if (!opts.instances.some((id) => silent.includes(id)) || Date.now() > until) return answer;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** The sizes of the feed's first `n` events. */
async function feedBytes(url: string, opts: { query: string; n: number }): Promise<number[]> {
  const res = await fetch(`${url}/admin/api/live${opts.query}`, { headers: ADMIN });
  const sizes: number[] = [];
  const parse = createSseParser((e) => sizes.push(new TextEncoder().encode(e.data).length));
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  try {
    while (sizes.length < opts.n) {
      const { value, done } = await reader.read();
      if (done) break;
      parse(value);
    }
  } finally {
    await reader.cancel();
  }
  return sizes;
}

async function openAdmin(browser: Browser, url: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1180, height: 900 } });
  const page = await context.newPage();
  page.on("pageerror", (err) => console.error(`page error: ${err.message}`));
  await page.goto(`${url}/admin`);
  await page.getByLabel("Admin token").fill(TOKEN);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator("#live-title").waitFor(WAIT);
  return page;
}

const liveRow = (page: Page, id: string) => page.locator(`#live tr[data-request-id="${id}"]`);

browserTest(import.meta.url, {
  name: "fleet live list: two processes, one list; search, abort on the other, a hung peer",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const up = startFakeUpstream({ fallback: () => contentThenSilence("partial") });
    const hung = startHungPeer();
    const dir = await Deno.makeTempDir({ prefix: "pulsegate-fleet-browser-" });
    const config = `${dir}/config.json`;
    await Deno.writeTextFile(
      config,
      JSON.stringify({
        upstreams: [{ id: "up1", kind: "openai-chat", base_url: up.url }],
        routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "m" }] }],
        failover: { idle_timeout_secs: 3600, retries_per_candidate: 0 },
        abort: { session_fence_secs: 0, turn_fence_secs: 0 },
      }),
    );
    const a = await startInstance(dir, { config });
    const b = await startInstance(dir, {}); // runs the config A stored
    const browser = await launchChromium();
    const held: Promise<string>[] = [];
    try {
      for (const [url, prefix] of [[a.url, "on-a"], [b.url, "on-b"]] as const) {
        for (let i = 0; i < 3; i++) held.push((await hold(url, `${prefix}-${i}`)).rest);
      }
      const stuck = await hold(b.url, "stuck-on-b");
      const idA = (await snapshot(a.url, "?limit=1")).instances.ids[0]!;
      const idB = (await snapshot(b.url, "?limit=1")).instances.ids[0]!;

      await t.step("either page lists the streams of both processes", async () => {
        for (const url of [a.url, b.url]) {
          const page = await openAdmin(browser, url);
          for (const id of ["on-a-0", "on-a-2", "on-b-1", "stuck-on-b"]) {
            await liveRow(page, id).waitFor(WAIT);
          }
          assert.match(await page.locator("#live .totals").textContent() ?? "", /^7 requests/);
          assert.match(await page.locator("#live .instances").textContent() ?? "", /2 of 2/);
          assert.equal(await liveRow(page, "on-b-0").getAttribute("data-instance"), idB);
          assert.equal(await liveRow(page, "on-a-0").getAttribute("data-instance"), idA);
          await page.context().close();
        }
      });

      await t.step("a search by id on A finds B's stream; Abort stops it there", async () => {
        const page = await openAdmin(browser, a.url);
        await liveRow(page, "on-a-0").waitFor(WAIT);
        await page.getByLabel("Search").fill("stuck-on");
        const row = liveRow(page, "stuck-on-b");
        await row.waitFor(WAIT);
        await liveRow(page, "on-a-0").waitFor({ state: "detached", ...WAIT });
        assert.equal(await page.locator("#live tbody tr").count(), 1);
        assert.match(
          await page.locator("#live .totals").textContent() ?? "",
          /^1 of 7 requests match/,
        );
        assert.match(await row.textContent() ?? "", new RegExp(`instance ${idB}`));
        await row.getByRole("button", { name: "Abort request stuck-on-b" }).click();
        const prompt = page.locator("#live").getByRole("alertdialog");
        await prompt.getByRole("button", { name: "Abort request stuck-on-b" }).click();
        const result = page.locator("#live .notice.ok");
        await result.waitFor(WAIT);
        assert.match(
          await result.textContent() ?? "",
          /^Aborted request stuck-on-b: 1 request stopped/,
        );
        assert.match(await stuck.rest, /gw\.request\.aborted/, "the caller's stream ends aborted");
        await page.locator("#live").getByText("No running request matches.").waitFor(WAIT);
        await page.context().close();
      });

      await t.step("a hung peer is shown as not answering; the list still updates", async () => {
        const page = await openAdmin(browser, a.url);
        await liveRow(page, "on-b-0").waitFor(WAIT);
        const db = await import("../db/client.ts").then((m) =>
          m.openDatabase(`file:${dir}/pulsegate.db`, { busyTimeoutMs: 5_000 })
        );
        try {
          await db.client.execute({
            sql: "INSERT INTO instances (id, started_at, heartbeat_at, url) VALUES (?, ?, ?, ?)",
            args: ["c0ffee", Date.now(), Date.now(), `http://127.0.0.1:${hung.addr.port}`],
          });
          // Read again within LIVE_PEERS_REFRESH_MS (5 s).
          const instances = page.locator("#live .instances");
          await page.getByText("2 of 3 instances · not answering: c0ffee").waitFor(WAIT);
          held.push((await hold(b.url, "late-on-b")).rest);
          await liveRow(page, "late-on-b").waitFor(WAIT);
          assert.match(await instances.textContent() ?? "", /not answering: c0ffee/);
          const metrics = await (await fetch(`${a.url}/metrics`, { headers: ADMIN })).text();
          assert.match(metrics, /pulsegate_live_peer_answers_total\{outcome="silent"\} [1-9]/);
          assert.match(metrics, /pulsegate_live_peer_answers_total\{outcome="ok"\} [1-9]/);
        } finally {
          await db.client.execute({ sql: "DELETE FROM instances WHERE id = 'c0ffee'" });
          db.close();
          await page.context().close();
        }
      });

      await t.step("the gateways filter and page: a tab's bytes follow the page", async () => {
        const onlyB = await onceAnswered(() => snapshot(a.url, `?instance=${idB}`), {
          silent: (page) => page.instances.silent,
          instances: [idB],
        });
        assert.deepEqual(onlyB.requests.map((r) => r.id).sort(), [
          "late-on-b",
          "on-b-0",
          "on-b-1",
          "on-b-2",
        ]);
        const [first, second] = await onceAnswered(async () => {
          const first = await snapshot(b.url, "?limit=4");
          const after = encodeURIComponent(first.page.next ?? "");
          return [first, await snapshot(b.url, `?limit=4&after=${after}`)] as const;
        }, {
          silent: (pages) => pages.flatMap((page) => page.instances.silent),
          instances: [idA],
        });
        const ids = [...first.requests, ...second.requests].map((r) => r.id);
        assert.equal(new Set(ids).size, 7, "two pages across both instances, none twice");
        assert.equal(second.page.offset, 4);
        assert.equal(second.page.next, null);
        const [pageOfTwo] = await feedBytes(a.url, { query: "?limit=2", n: 1 });
        const [pageOfAll] = await feedBytes(a.url, { query: "", n: 1 });
        assert.ok(pageOfTwo! < pageOfAll!, `${pageOfTwo} < ${pageOfAll}`);
        assert.ok(pageOfAll! < 64 * 1024);
      });
    } finally {
      await browser.close();
      // The held streams end first, so neither process waits for them at its stop.
      for (const id of ["on-a-0", "on-a-1", "on-a-2", "on-b-0", "on-b-1", "on-b-2", "late-on-b"]) {
        await fetch(`${a.url}/request/${id}/abort`, { method: "POST", headers: ADMIN })
          .then((res) => res.body?.cancel());
      }
      a.child.kill("SIGTERM");
      b.child.kill("SIGTERM");
      await Promise.all([a.child.status, b.child.status, hung.shutdown()]);
      await Promise.all(held.map((p) => p.catch(String)));
      await up.close();
    }
  },
}, {
  parentName:
    "fleet live list in headless Chromium (in a child deno test --allow-all, for playwright)",
  ran: /ok \| 1 passed \(4 steps\) \| 0 failed/,
  what: "it ran",
});
