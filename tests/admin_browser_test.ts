/**
 * The admin page in headless Chromium (Debian's, driven by playwright-core). Each step runs its
 * own gateway at the test time scale and a fresh browser context (so a fresh sessionStorage).
 * With PULSEGATE_SCREENSHOTS=1 the steps also write the screenshots of docs/admin.md.
 *
 * playwright-core probes /proc/sys/fs/binfmt_misc/WSLInterop when it loads, which Deno allows
 * only with --allow-all, more than `deno task test` grants. So under the suite this file runs
 * itself again in a child `deno test --allow-all` and passes or fails with it; only the child
 * imports playwright.
 */
import assert from "node:assert/strict";
import type { Browser, BrowserContext, Locator, Page } from "playwright-core";
import { loadStoredConfig } from "../db/config_store.ts";
import { upsertAttempts, upsertRequests } from "../db/history_rows.ts";
import type { AttemptOutcome } from "../db/records.ts";
import { attemptRecord, requestRecord } from "./db_helpers.ts";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { ADMIN, dirWithStoredConfig, eventually, streamingRequest } from "./admin_helpers.ts";
import {
  chatError,
  chatStream,
  contentThenSilence,
  silentAfterHeaders,
} from "./fake_upstreams/openai_chat_script.ts";
import { type FakeUpstream, startFakeUpstream } from "./fake_upstreams/server.ts";
import { browserTest, CHROMIUM, hasChromium, launchChromium } from "./browser_child.ts";
import { chatRoute, postJson, startTestGateway, type TestGateway, withGateway } from "./harness.ts";

const SCREENSHOTS = Deno.env.get("PULSEGATE_SCREENSHOTS") === "1";
const IMG = new URL("../docs/img/", import.meta.url);
// Generous: a passing step never waits it out.
const WAIT = { timeout: 15_000 };

// 36 s at the test scale: a hanging request stays live until the test aborts it.
const patient = { idle_timeout_secs: 3600, retries_per_candidate: 0 };
const ask = (stream: boolean) => ({
  model: "smart",
  stream,
  messages: [{ role: "user", content: "hi" }],
});
const good = { text: ["good ", "answer"], usage: { input: 12, output: 2 } };

// Tabs opened during a step; closed before its gateway stops, whether the step passed or not.
const tabs = new Set<BrowserContext>();

async function closeTabs(): Promise<void> {
  for (const tab of tabs) await tab.close();
  tabs.clear();
}

if (!hasChromium) console.log(`admin browser test SKIPPED: no ${CHROMIUM}`);

/** A gateway with the admin token over fake upstreams; the browser's tabs close before it stops. */
function withAdminPage(
  run: (gw: TestGateway, ups: FakeUpstream[]) => Promise<void>,
  opts: { upstreams?: number; config?: (urls: string[]) => ConfigInput; dir?: string } = {},
): Promise<void> {
  return withGateway(async (gw, ups) => {
    try {
      await run(gw, ups);
    } finally {
      await closeTabs();
    }
  }, {
    upstreams: opts.upstreams,
    // A given data directory starts from the config stored there.
    config: (urls) =>
      opts.dir ? undefined : opts.config?.(urls) ?? chatRoute(urls, { failover: patient }),
    dir: opts.dir,
    env: { PULSEGATE_ADMIN_TOKEN: ADMIN },
  });
}

/** A fresh tab (own sessionStorage) on /admin; signed in unless told otherwise. */
async function openAdmin(
  browser: Browser,
  gw: TestGateway,
  opts: { token?: string | null; width?: number } = {},
): Promise<Page> {
  const context = await browser.newContext({
    viewport: { width: opts.width ?? 1180, height: 900 },
    deviceScaleFactor: 1,
  });
  tabs.add(context);
  const page = await context.newPage();
  page.on("pageerror", (err) => console.error(`page error: ${err.message}`));

  await page.goto(`${gw.url}/admin`);
  const token = opts.token === undefined ? ADMIN : opts.token;
  if (token !== null) await signIn(page, token);
  return page;
}

async function signIn(page: Page, token: string): Promise<void> {
  await page.getByLabel("Admin token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
}

/**
 * What `read` gives once it gives `want`, or what it last gave after WAIT: the page moves focus
 * in an effect after the render that shows the element, so an immediate read can be early.
 */
async function focusOnceSettled<T>(page: Page, read: () => T, want: T): Promise<T> {
  let got = await page.evaluate(read);
  // The caller's assert names what went wrong, with what was last read.
  await eventually(async () => (got = await page.evaluate(read)) === want, { ms: WAIT.timeout })
    .catch(() => {});
  return got;
}

async function shot(target: Page | Locator, name: string): Promise<void> {
  if (!SCREENSHOTS) return;
  await Deno.mkdir(IMG, { recursive: true });
  const path = new URL(`${name}.png`, IMG).pathname;
  await target.screenshot({ path });
}

function liveRow(page: Page, id: string): Locator {
  return page.locator(`#live tr[data-request-id="${id}"]`);
}

async function text(locator: Locator): Promise<string> {
  return (await locator.textContent()) ?? "";
}

/** Stores a finished request with the given hops, as a hedge or a resume would record them. */
async function recordChain(
  gw: TestGateway,
  id: string,
  hops: { upstream: string; at: number; lasted: number; outcome: string; content?: number }[],
): Promise<void> {
  const t0 = Date.now() - 1000;
  const end = Math.max(...hops.map((h) => h.at + h.lasted));
  const request = requestRecord({
    id,
    state: "closed",
    startedAt: t0,
    endedAt: t0 + end,
    status: 200,
    outcome: "success",
    upstream: hops.at(-1)!.upstream,
    durationMs: end,
    firstContentMs: Math.min(...hops.map((h) => h.at + (h.content ?? end))),
  });
  const attempts = hops.map((h, i) =>
    attemptRecord({
      requestId: id,
      hop: i + 1,
      upstream: h.upstream,
      startedAt: t0 + h.at,
      headersMs: 5,
      firstContentMs: h.content ?? null,
      durationMs: h.lasted,
      outcome: h.outcome as AttemptOutcome,
      status: 200,
    })
  );
  await gw.db.client.batch([...upsertRequests([request]), ...upsertAttempts(attempts)], "write");
}

// Under the suite this runs the file again in a child, where the test itself runs.
browserTest(import.meta.url, {
  name: "admin page in headless Chromium",
  // playwright keeps its driver connection and the browser process between steps.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const browser = await launchChromium();
    try {
      await t.step("a wrong token is refused with a visible message", async () => {
        await withAdminPage(async (gw) => {
          const page = await openAdmin(browser, gw, { token: "not-the-token" });
          const refusal = page.getByRole("alert");
          await refusal.waitFor(WAIT);
          assert.equal(await text(refusal), "Token refused: wrong admin token.");
          assert.equal(await page.locator("#live-title").count(), 0, "no panel shows");
          assert.equal(await page.evaluate(() => sessionStorage.length), 0, "nothing stored");
          await shot(page.locator("header.top"), "admin-login-refused");
          await signIn(page, ADMIN);
          await page.locator("#live-title").waitFor(WAIT);
          await page.reload();
          await page.locator("#live-title").waitFor(WAIT);
          assert.match(await text(page.locator(".login")), /Signed in/, "kept for the tab");
        });
      });

      await t.step(
        "a live stream appears in the live list; its Abort button stops it",
        async () => {
          await withAdminPage(async (gw, [up]) => {
            up!.setHandler(() => contentThenSilence("partial "));
            const page = await openAdmin(browser, gw);
            const { rest } = await streamingRequest(gw, {
              "x-request-id": "live-1",
              "x-session-id": "chat-7",
            });
            const row = liveRow(page, "live-1");
            await row.getByText("streaming").waitFor(WAIT);
            const cells = await text(row);
            assert.match(cells, /chat-7/);
            assert.match(cells, /smart/);
            assert.match(cells, /up1 \(hop 1\)/);
            assert.match(cells, /openai-chat · stream/);
            await shot(page.locator("#live"), "admin-live");
            // Totals per state, a filter that hides the row, then back.
            assert.match(await text(page.locator("#live .totals")), /1 request · 1 streaming/);
            await page.locator('select[name="live-state"]').selectOption("streaming");
            await page.locator('select[name="live-upstream"]').selectOption("up1");
            await row.waitFor(WAIT);
            await page.locator('input[name="live-session"]').fill("nope");
            await page.locator("#live").getByText("No running request matches.").waitFor(WAIT);
            await page.locator('input[name="live-session"]').fill("chat");
            await row.waitFor(WAIT);
            // Abort asks first, naming the request, with focus on the confirmation; Cancel stops
            // nothing.
            await row.getByRole("button", { name: "Abort request live-1" }).click();
            const prompt = page.locator("#live").getByRole("alertdialog");
            await prompt.waitFor(WAIT);
            assert.match(await text(prompt), /Abort request live-1\?/);
            assert.equal(
              await focusOnceSettled(
                page,
                () => document.activeElement?.textContent,
                "Abort request live-1",
              ),
              "Abort request live-1",
              "focus moves to the confirmation",
            );
            await prompt.getByRole("button", { name: "Cancel" }).click();
            await prompt.waitFor({ state: "detached", ...WAIT });
            assert.equal(gw.registry.has("live-1"), true, "cancel aborts nothing");
            await row.getByRole("button", { name: "Abort request live-1" }).click();
            await prompt.getByRole("button", { name: "Abort request live-1" }).click();
            const result = page.locator("#live .notice");
            await result.waitFor(WAIT);
            assert.match(
              await text(result),
              /^Aborted request live-1: 1 request stopped \(live-1\)/,
            );
            assert.equal(
              await focusOnceSettled(
                page,
                () => document.activeElement?.getAttribute("role"),
                "status",
              ),
              "status",
              "after the abort, focus is on its result",
            );
            const seen = await rest;
            assert.match(seen, /data: \{"error":/, "the client's stream ends with an error event");
            assert.match(seen, /gw\.request\.aborted/);
            const { request } = await gw.row("live-1");
            assert.equal(request.failureSource, "aborted");
            assert.equal(request.errorCode, "gw.request.aborted");
            await page.locator("#live").getByText("No request is running.").waitFor(WAIT);
          });
        },
      );

      await t.step("Abort session stops every request of that session and no other", async () => {
        await withAdminPage(async (gw, [up]) => {
          up!.setHandler(() => contentThenSilence("partial "));
          const page = await openAdmin(browser, gw);
          const a = await streamingRequest(gw, {
            "x-request-id": "sa-1",
            "x-session-id": "sess-A",
          });
          const b = await streamingRequest(gw, {
            "x-request-id": "sa-2",
            "x-session-id": "sess-A",
          });
          const other = await streamingRequest(gw, {
            "x-request-id": "sb-1",
            "x-session-id": "sess-B",
          });
          for (const id of ["sa-1", "sa-2", "sb-1"]) {
            await liveRow(page, id).getByText("streaming").waitFor(WAIT);
          }
          await liveRow(page, "sa-2").getByRole("button", { name: "Abort session sess-A" })
            .click();
          await page.locator("#live").getByRole("alertdialog")
            .getByRole("button", { name: "Abort session sess-A" }).click();
          const result = page.locator("#live .notice");
          await result.waitFor(WAIT);
          assert.match(
            await text(result),
            /^Aborted session sess-A: 2 requests stopped \(sa-1, sa-2\)/,
          );
          await result.getByRole("button", { name: "Dismiss" }).click();
          await result.waitFor({ state: "detached", ...WAIT });
          for (const seen of [await a.rest, await b.rest]) {
            assert.match(seen, /gw\.request\.aborted/);
          }
          for (const id of ["sa-1", "sa-2"]) {
            assert.equal((await gw.row(id)).request.errorCode, "gw.request.aborted");
          }
          await eventually(async () => await liveRow(page, "sa-1").count() === 0);
          assert.equal(await liveRow(page, "sb-1").count(), 1, "the other session runs on");
          await liveRow(page, "sb-1").getByRole("button", { name: "Abort request sb-1" }).click();
          await page.locator("#live").getByRole("alertdialog")
            .getByRole("button", { name: "Abort request sb-1" }).click();
          assert.match(await other.rest, /gw\.request\.aborted/);
        });
      });

      await t.step(
        "history shows the attempt chain of a failed-over request; health its cost",
        async () => {
          await withAdminPage(async (gw, [a, b]) => {
            a!.enqueue(chatStream(good), silentAfterHeaders, chatError(500, "upstream broke"));
            b!.enqueue(chatStream(good), chatError(503, "also down"));
            for (const id of ["ok-1", "fo-1", "fail-1"]) {
              // No session: affinity would send the last one to up2 first.
              const res = await postJson(`${gw.url}/v1/chat/completions`, ask(true), {
                "x-request-id": id,
              });
              await res.text();
              await gw.row(id);
            }
            // up1 is paused by now: this one runs on up2, a slow steady stream that stays live
            // for the overview (30 s of content every 50 ms, 24x under the 1.2 s window).
            const ticks = Array.from({ length: 600 }, () => "tick ");
            b!.enqueue(chatStream({ text: ["partial ", ...ticks] }, { gap: 50 }));
            await streamingRequest(gw, {
              "x-request-id": "still-running",
              "x-session-id": "chat-42",
            });
            const page = await openAdmin(browser, gw);
            const history = page.locator("#history");
            const listed = history.locator('tr[data-request-id="fo-1"]');
            await listed.waitFor(WAIT);
            await liveRow(page, "still-running").getByText("streaming").waitFor(WAIT);
            await page.locator('#health tr[data-upstream="up2"]').waitFor(WAIT);
            await shot(page, "admin-overview");
            assert.match(await text(listed), /up1 idle_timeout → up2 success/);
            assert.match(
              await text(history.locator('tr[data-request-id="fail-1"]')),
              /up1 error → up2 error/,
            );
            await shot(history, "admin-history");
            const opener = listed.getByRole("button", { name: "Show request fo-1" });
            await opener.click();
            const dialog = page.getByRole("dialog", { name: "Request fo-1" });
            await dialog.waitFor(WAIT);
            assert.equal(
              await focusOnceSettled(page, () => document.activeElement?.id, "detail-title"),
              "detail-title",
              "focus moves to the detail",
            );
            const hops = dialog.locator("table.attempts tbody tr");
            await hops.first().waitFor(WAIT);
            assert.equal(await hops.count(), 2);
            const first = await text(hops.nth(0));
            assert.match(first, /up1/);
            assert.match(first, /idle_timeout/);
            assert.match(first, /gw\.upstream\.idle_timeout/);
            const second = await text(hops.nth(1));
            assert.match(second, /up2/);
            assert.match(second, /success/);
            assert.match(second, /200/);
            assert.match(second, /12 in \/ 2 out/);
            // The timeline: hop 1 ends in an idle timeout after its headers, hop 2 starts where
            // it ended and shows its headers and first content.
            const bars = dialog.locator("svg g.hop");
            assert.equal(await bars.count(), 2);
            const timedOut = dialog.locator('g.hop[data-hop="1"]');
            assert.equal(await timedOut.getAttribute("class"), "hop idle_timeout");
            assert.equal(await timedOut.locator(".mark.headers").count(), 1);
            assert.equal(await timedOut.locator(".mark.content").count(), 0);
            assert.equal(await timedOut.locator(".mark.end").count(), 1);
            const won = dialog.locator('g.hop[data-hop="2"]');
            assert.equal(await won.locator(".mark.content").count(), 1);
            const [end1, start2] = [
              await timedOut.locator("rect.bar").evaluate((r) => r.getBoundingClientRect().right),
              await won.locator("rect.bar").evaluate((r) => r.getBoundingClientRect().left),
            ];
            assert.ok(start2 >= end1 - 1, `hop 2 (${start2}) starts after hop 1 ends (${end1})`);
            assert.match(
              (await dialog.locator("svg").getAttribute("aria-label")) ?? "",
              /hop 1 up1: sent at \d+ ms, headers at \d+ ms, idle_timeout at \d+ ms/,
            );
            await shot(dialog, "admin-request-detail");
            await page.keyboard.press("Escape");
            await dialog.waitFor({ state: "detached", ...WAIT });
            assert.equal(
              await focusOnceSettled(
                page,
                () => document.activeElement?.getAttribute("aria-label"),
                "Show request fo-1",
              ),
              "Show request fo-1",
              "focus goes back to what opened the detail",
            );
            // A hedge and a resumed answer, as those features record them (on upstreams the
            // health panel does not count).
            await recordChain(gw, "hr-1", [
              { upstream: "slow", at: 0, lasted: 120, outcome: "hedge_lost" },
              { upstream: "fast", at: 100, lasted: 200, outcome: "idle_timeout", content: 20 },
              { upstream: "next", at: 300, lasted: 150, outcome: "resumed", content: 30 },
            ]);
            await history.getByRole("button", { name: "Refresh" }).click();
            await history.getByRole("button", { name: "Show request hr-1" }).click();
            const chain = page.getByRole("dialog", { name: "Request hr-1" });
            await chain.waitFor(WAIT);
            assert.equal(await chain.locator("rect.hedge-band").count(), 2, "hedges share a band");
            assert.equal(await chain.locator('g.join[data-joins="2-3"]').count(), 1);
            assert.match(await text(chain.locator('g.hop[data-hop="1"] .outcome')), /hedge lost/);
            await shot(chain, "admin-timeline-hedge-resume");
            await chain.getByRole("button", { name: "Close" }).click();
            await chain.waitFor({ state: "detached", ...WAIT });

            await history.getByLabel("Outcome").selectOption("error");
            await history.getByRole("button", { name: "Search" }).click();
            await history.locator('tr[data-request-id="fo-1"]').waitFor({
              state: "detached",
              ...WAIT,
            });
            assert.equal(await history.locator("tbody tr[data-request-id]").count(), 1);
            assert.equal(await history.locator('tr[data-request-id="fail-1"]').count(), 1);
            // The filters pick from known values: the configured upstreams, the outcome kinds.
            assert.deepEqual(
              await history.getByLabel("Upstream").locator("option").allTextContents(),
              ["any", "up1", "up2"],
            );
            await history.getByLabel("Outcome").selectOption({
              label: "idle timeout before content",
            });
            await history.getByRole("button", { name: "Search" }).click();
            await history.locator('tr[data-request-id="fo-1"]').waitFor(WAIT);
            assert.equal(await history.locator("tbody tr[data-request-id]").count(), 1);

            // Trends: fo-1 and hr-1 each timed out once; fo-1, fail-1 and hr-1 failed over.
            const trends = page.locator("#trends");
            await trends.getByRole("button", { name: "Refresh" }).click();
            const chart = (title: string) => trends.locator(`figure[data-chart="${title}"]`);
            const sum = async (bars: Locator) =>
              (await bars.locator("title").allTextContents())
                .reduce((n, t) => n + Number(t.split(": ").at(-1)), 0);
            const stalls = chart("Idle timeouts and failovers");
            await eventually(async () => await sum(stalls.locator("rect.s-warn")) === 3);
            assert.equal(await sum(stalls.locator("rect.s-bad")), 2, "two idle timeouts");
            const requests = chart("Requests/s by outcome");
            assert.ok(await requests.locator("rect.s-ok").count() >= 1);
            assert.ok(await requests.locator("rect.s-bad").count() >= 1, "fail-1 is an error");
            assert.ok(await chart("Time to first content").locator("circle").count() >= 1);
            await shot(trends, "admin-trends");
            await trends.locator("select[name=trend-upstream]").selectOption("up2");
            await eventually(async () => await stalls.locator("rect").count() === 0);
            assert.match(
              (await stalls.locator("svg").getAttribute("aria-label")) ?? "",
              /nothing in this window/,
              "up2 neither timed out nor failed over",
            );
            await trends.locator("select[name=trend-window]").selectOption({ label: "last 24 h" });
            await eventually(async () => await requests.locator("rect.s-ok").count() >= 1);

            const up1 = page.locator('#health tr[data-upstream="up1"]');
            await up1.waitFor(WAIT);
            assert.match(await text(up1), /0 \/ 64/);
            assert.match(await text(up1), /paused until/, "two failures in a row paused it");
            assert.match(await text(up1), /3 attempts · 2 failed/);
            assert.match(await text(up1), /2 failures in a row; last: gw\.upstream\.error/);
            assert.doesNotMatch(await text(up1), /0 failures in a row/);
            await shot(page.locator("#health"), "admin-health");
            await up1.getByRole("button", { name: "Resume up1" }).click();
            await page.getByText("Upstream up1 resumed").waitFor(WAIT);
            await up1.getByText("ok", { exact: true }).waitFor(WAIT);
            assert.equal(gw.cooldowns.isPaused("up1"), false);
          }, {
            upstreams: 2,
            config: (urls) =>
              chatRoute(urls, {
                failover: {
                  idle_timeout_secs: 120,
                  retries_per_candidate: 0,
                  failures_to_pause: 2,
                  pause_secs: 3600,
                  max_pause_secs: 3600,
                },
              }),
          });
        },
      );

      await t.step(
        "the config editor shows each problem at its key path; a valid save applies",
        async () => {
          await withAdminPage(async (gw) => {
            const page = await openAdmin(browser, gw);
            const editor = page.getByLabel("Config JSON");
            await eventually(async () => (await editor.inputValue()).includes("3600"));
            const original = await editor.inputValue();
            await editor.fill(
              original.replace('"idle_timeout_secs": 3600', '"idle_timeout_secs": 5, "idle": 1'),
            );
            await page.getByRole("button", { name: "Save" }).click();
            const problems = page.getByRole("list", { name: "Config problems" });
            await problems.waitFor(WAIT);
            const listed = await text(problems);
            assert.match(listed, /failover\.idle_timeout_secs\s*must be between 30 and 3600/);
            assert.match(listed, /failover\.idle\s*unknown field "idle"/);
            assert.equal(
              await text(page.locator("#config .notice")),
              "Not saved: the config has 2 problems.",
            );
            await editor.evaluate((area) => (area.scrollTop = 0));
            await shot(page.locator("#config"), "admin-config-errors");
            assert.equal(gw.state.config?.failover.idle_timeout_secs, 3600, "nothing applied");

            await editor.fill("{ not json");
            await page.getByRole("button", { name: "Save" }).click();
            await page.locator("#config").getByText("Not valid JSON").waitFor(WAIT);

            // A problem far down a long document: clicking it scrolls its key into view.
            await editor.fill(
              original.replace("{", "{" + "\n".repeat(60))
                .replace('"model": "model-1"', '"model": "model-1", "weight": 2'),
            );
            await page.getByRole("button", { name: "Save" }).click();
            const far = problems.getByRole("button", { name: "routes.0.candidates.0.weight" });
            await far.waitFor(WAIT);
            // On a short screen, with the problem list at the top and the editor above it.
            await page.setViewportSize({ width: 1180, height: 400 });
            await editor.evaluate((area) => (area.scrollTop = 0));
            await far.evaluate((button) => button.scrollIntoView({ block: "start" }));
            await far.click();
            const seen = await editor.evaluate((element) => {
              const area = element as HTMLTextAreaElement;
              const line = area.value.slice(0, area.selectionStart).split("\n").length - 1;
              const y = line * parseFloat(getComputedStyle(area).lineHeight);
              const onScreen = area.getBoundingClientRect().top + y - area.scrollTop;
              return {
                selected: area.value.slice(area.selectionStart, area.selectionEnd),
                inEditor: y >= area.scrollTop && y < area.scrollTop + area.clientHeight,
                onScreen: onScreen >= 0 && onScreen < innerHeight,
                focused: document.activeElement === area,
              };
            });
            assert.deepEqual(seen, {
              selected: '"weight"',
              inEditor: true,
              onScreen: true,
              focused: true,
            });
            await page.setViewportSize({ width: 1180, height: 900 });

            // A valid save is shown as a diff first; Cancel stores nothing.
            await editor.fill(
              original.replace('"idle_timeout_secs": 3600', '"idle_timeout_secs": 60'),
            );
            await page.getByRole("button", { name: "Save" }).click();
            const confirm = page.locator("#config").getByRole("alertdialog");
            await confirm.waitFor(WAIT);
            assert.equal(
              await text(confirm.locator("table.diff tbody")),
              "failover.idle_timeout_secs360060",
            );
            assert.equal(
              await focusOnceSettled(
                page,
                () => document.activeElement?.textContent,
                "Save these changes",
              ),
              "Save these changes",
              "focus moves to the confirmation",
            );
            await shot(page.locator("#config"), "admin-config-diff");
            await confirm.getByRole("button", { name: "Cancel" }).click();
            await confirm.waitFor({ state: "detached", ...WAIT });
            assert.equal(gw.state.config?.failover.idle_timeout_secs, 3600, "nothing saved");
            await page.getByRole("button", { name: "Save" }).click();
            await confirm.getByRole("button", { name: "Save these changes" }).click();
            await page.locator("#config").getByText("Saved: the new config is in force.").waitFor(
              WAIT,
            );
            assert.equal(gw.state.config?.failover.idle_timeout_secs, 60);
            const stored = (await loadStoredConfig(gw.db))?.body as ConfigInput;
            assert.equal(stored.failover?.idle_timeout_secs, 60);

            // Every version is kept; one click (and a confirmation) puts the first one back.
            const versions = page.locator("#config table.versions tbody tr");
            await eventually(async () => await versions.count() === 2);
            assert.match(await text(versions.nth(0)), /^2in force.*admin/);
            assert.match(await text(versions.nth(1)), /^1.*config file at start/);
            const savedAt = versions.nth(0).locator("time");
            assert.match(
              (await savedAt.getAttribute("title")) ?? "",
              /\d{4}.*\d{1,2}:\d{2}:\d{2}.*(UTC|GMT|[A-Z]{3,4})/,
              "the full date, time and zone on hover",
            );
            await page.getByRole("button", { name: "Roll back to version 1" }).click();
            await confirm.waitFor(WAIT);
            assert.equal(
              await text(confirm.locator("table.diff tbody")),
              "failover.idle_timeout_secs603600",
            );
            await confirm.getByRole("button", { name: "Roll back to version 1" }).click();
            await page.locator("#config").getByText(/^Rolled back to version 1/).waitFor(WAIT);
            assert.equal(gw.state.config?.failover.idle_timeout_secs, 3600);
            await eventually(async () => await versions.count() === 3);
            assert.match(await text(versions.nth(0)), /^3in force.*admin.*rollback to version 1/);
            await shot(page.locator("#config"), "admin-config-versions");
          });
        },
      );

      await t.step(
        "safe mode: an unknown key is shown with its repair; Apply repair resumes proxying",
        async () => {
          const up = startFakeUpstream({ fallback: () => chatStream(good) });
          const config = chatRoute([up.url]);
          const dir = await dirWithStoredConfig({ ...config, failover: { idle_timeout: 30 } });
          try {
            await withAdminPage(async (gw) => {
              const refused = await postJson(`${gw.url}/v1/chat/completions`, ask(false));
              assert.equal(refused.status, 503);
              assert.equal((await refused.json()).error.code, "config.invalid");
              const page = await openAdmin(browser, gw);
              const banner = page.locator(".safe-mode");
              await banner.waitFor(WAIT);
              const shown = await text(banner);
              assert.match(shown, /Safe mode/);
              assert.match(
                shown,
                /failover\.idle_timeout unknown field "idle_timeout" \(did you mean "idle_timeout_secs"\?\)/,
              );
              assert.match(shown, /Delete failover\.idle_timeout \(unknown field\)/);
              await shot(banner, "admin-safe-mode");
              await banner.getByRole("button", { name: "Apply repair" }).click();
              const notice = page.getByText(/^Repaired \(failover\.idle_timeout\)/);
              await notice.waitFor(WAIT);
              assert.match(await text(notice), /proxying has resumed/);
              // The notice and the banner's removal may land in separate renders.
              await banner.waitFor({ state: "detached", ...WAIT });
              assert.deepEqual((await loadStoredConfig(gw.db))?.body, { ...config, failover: {} });
              const ok = await postJson(`${gw.url}/v1/chat/completions`, ask(true));
              assert.equal(ok.status, 200, "proxying resumed");
              assert.match(await ok.text(), /good /);
            }, { dir });
          } finally {
            await up.close();
          }
        },
      );

      await t.step(
        "the demo profile is labelled SIMULATED; loopback without a token needs no sign-in",
        async () => {
          const gw = await startTestGateway(undefined);
          try {
            const page = await openAdmin(browser, gw, { token: null });
            await page.locator("#live-title").waitFor(WAIT);
            assert.match(await text(page.locator(".demo")), /SIMULATED/);
            assert.match(await text(page.locator(".login")), /Open on loopback/);
            await page.locator("#health .tag.simulated").first().waitFor(WAIT);
            assert.equal(await page.locator("#health .tag.simulated").count(), 3);
          } finally {
            await closeTabs();
            await gw.stop();
          }
        },
      );

      await t.step("on a phone the page fits the screen", async () => {
        await withAdminPage(async (gw, [up]) => {
          up!.setHandler(() => contentThenSilence("partial "));
          const page = await openAdmin(browser, gw, { width: 390 });
          const { rest } = await streamingRequest(gw, {
            "x-request-id": "phone-1",
            "x-session-id": "s-9",
          });
          await liveRow(page, "phone-1").getByText("streaming").waitFor(WAIT);
          const overflow = await page.evaluate(() =>
            document.documentElement.scrollWidth - document.documentElement.clientWidth
          );
          assert.equal(overflow, 0, "no sideways scrolling");
          await shot(page.locator("#live"), "admin-phone-live");
          await liveRow(page, "phone-1").getByRole("button", { name: "Abort request phone-1" })
            .click();
          await page.locator("#live").getByRole("alertdialog")
            .getByRole("button", { name: "Abort request phone-1" }).click();
          assert.match(await rest, /gw\.request\.aborted/);
        });
      });
    } finally {
      await browser.close();
    }
  },
}, {
  parentName: "admin page in headless Chromium (in a child deno test --allow-all, for playwright)",
  ran: /ok \| 1 passed \(\d+ steps\) \| 0 failed/,
  what: "every step ran",
});
