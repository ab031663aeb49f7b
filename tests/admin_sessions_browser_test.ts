/**
 * The Sessions panel in headless Chromium (docs/admin.md "Sessions"): a Claude Code-shaped
 * session of ten turns stays on one upstream while the other is less loaded, and the panel shows
 * its requests, cache hit rate and cost; its Abort session button stops its running request.
 *
 * Like tests/admin_browser_test.ts, under the suite this file runs itself again in a child
 * `deno test --allow-all` (playwright-core needs it); only the child imports playwright.
 * With PULSEGATE_SCREENSHOTS=1 it writes docs/img/admin-sessions.png.
 */
import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import { ADMIN, eventually } from "./admin_helpers.ts";
import * as anthropicFake from "./fake_upstreams/anthropic_script.ts";
import type { Script } from "./fake_upstreams/server.ts";
import { browserTest, launchChromium } from "./browser_child.ts";
import { postJson, withGateway } from "./harness.ts";

const SCREENSHOTS = Deno.env.get("PULSEGATE_SCREENSHOTS") === "1";
const WAIT = { timeout: 15_000 };

const SESSION = "cc-5f1e2d";
const SSE = { "content-type": "text/event-stream" };
/** Turn 1 writes the 20,000-token prefix; every later turn reads it and writes its own 1,000. */
const turnUsage = (n: number) =>
  n === 1
    ? { input: 50, output: 20, cacheWrite: 20_000 }
    : { input: 50, output: 20, cacheRead: 20_000, cacheWrite: 1000 };
// Inputs 20,050 + 9 x 21,050 = 209,500, of which 9 x 20,000 = 180,000 read: 86%.

/** The shape Claude Code sends: its session header and user_id, cached tools and system. */
function claudeCodeTurn(n: number) {
  const messages: unknown[] = [];
  for (let i = 1; i <= n; i++) {
    messages.push({ role: "user", content: [{ type: "text", text: `step ${i}` }] });
    if (i < n) messages.push({ role: "assistant", content: [{ type: "text", text: "done" }] });
  }
  return {
    model: "smart",
    max_tokens: 1000,
    stream: true,
    metadata: { user_id: JSON.stringify({ device_id: "d", session_id: SESSION }) },
    tools: [{
      name: "Bash",
      input_schema: { type: "object" },
      cache_control: { type: "ephemeral" },
    }],
    system: [
      { type: "text", text: "You are Claude Code." },
      { type: "text", text: "Instructions.", cache_control: { type: "ephemeral" } },
    ],
    messages,
  };
}

const answer = (usage: anthropicFake.AnthropicScript["usage"]): Script => ({
  headers: SSE,
  body: anthropicFake.streamChunks({ text: ["ok"], usage }).map((send) => ({ send })),
});

// Under the suite this runs the file again in a child, where the test itself runs.
browserTest(import.meta.url, {
  name: "sessions panel: ten Claude Code turns on one upstream, their cache hit rate, Abort",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const browser = await launchChromium();
    try {
      await withGateway(async (gw, [a, b]) => {
        // Another client's stream holds up1 from turn 5 on: without affinity the least loaded
        // neighbour, up2, would take the session's next turns.
        const release = Promise.withResolvers<void>();
        for (const up of [a!, b!]) {
          up.setHandler((call) => {
            const body = call.json as { messages: unknown[]; metadata?: unknown };
            if (!body.metadata) {
              return {
                headers: SSE,
                body: [
                  ...anthropicFake.streamChunks({ text: ["x"], usage: { input: 1, output: 1 } })
                    .slice(0, 3).map((send) => ({ send })),
                  { until: release.promise },
                ],
              };
            }
            return answer(turnUsage((body.messages.length + 1) / 2));
          });
        }
        const turn = async (n: number) => {
          const res = await postJson(`${gw.url}/v1/messages`, claudeCodeTurn(n), {
            "x-claude-code-session-id": SESSION,
          });
          assert.equal(res.status, 200);
          await res.text();
        };
        await turn(1);
        const home = a!.calls.length === 1 ? a! : b!;
        const other = home === a ? b! : a!;
        for (let n = 2; n <= 4; n++) await turn(n);
        const busy = postJson(`${gw.url}/v1/messages`, {
          model: "smart",
          max_tokens: 10,
          stream: true,
          messages: [{ role: "user", content: "elsewhere" }],
        });
        const homeId = home === a ? "up1" : "up2";
        await eventually(() => gw.slots.inFlight(homeId) === 1);
        for (let n = 5; n <= 10; n++) await turn(n);
        assert.equal(other.calls.length, 0, "the session never left its warm upstream");
        assert.equal(home.calls.length, 11);

        const context = await browser.newContext({ viewport: { width: 1180, height: 900 } });
        try {
          const page: Page = await context.newPage();
          page.on("pageerror", (err) => console.error(`page error: ${err.message}`));
          await page.goto(`${gw.url}/admin`);
          await page.getByLabel("Admin token").fill(ADMIN);
          await page.getByRole("button", { name: "Sign in" }).click();
          const row = page.locator(`#sessions tr[data-session-id="${SESSION}"]`);
          await row.waitFor(WAIT);
          const cells = (await row.textContent()) ?? "";
          assert.match(cells, /smart/);
          assert.match(cells, new RegExp(`on ${homeId}`));
          assert.match(cells, /Requests\s*10|10/);
          const rate = (await row.locator("td.hit-rate").textContent()) ?? "";
          assert.match(rate, /^86%/, "180,000 of 209,500 input tokens read from the cache");
          assert.match(rate, /180000 read, 29000 written/);
          if (SCREENSHOTS) {
            await page.locator("#sessions").screenshot({
              path: new URL("../docs/img/admin-sessions.png", import.meta.url).pathname,
            });
          }

          // An eleventh turn that hangs: the row counts it running; Abort session stops it.
          home.setHandler(() => ({
            headers: SSE,
            body: [
              ...anthropicFake.streamChunks({ text: ["x"], usage: { input: 1, output: 1 } })
                .slice(0, 3).map((send) => ({ send })),
              { hang: true },
            ],
          }));
          const hanging = postJson(`${gw.url}/v1/messages`, claudeCodeTurn(11), {
            "x-claude-code-session-id": SESSION,
          }).then((res) => res.text());
          await eventually(() => home.calls.length === 12);
          await page.locator("#sessions").getByRole("button", { name: "Refresh" }).click();
          const abort = row.getByRole("button", { name: `Abort session ${SESSION}` });
          await abort.waitFor(WAIT);
          assert.match((await row.textContent()) ?? "", /1 running/);
          await abort.click();
          await page.locator("#sessions").getByRole("alertdialog")
            .getByRole("button", { name: `Abort session ${SESSION}` }).click();
          assert.match(await hanging, /gw\.request\.aborted/);
          await page.locator("#sessions").getByText(/^Aborted session/).waitFor(WAIT);
        } finally {
          release.resolve();
          await context.close();
          await (await busy).text().catch(() => "");
        }
      }, {
        upstreams: 2,
        env: { PULSEGATE_ADMIN_TOKEN: ADMIN },
        config: (urls) => ({
          failover: { idle_timeout_secs: 3600 },
          upstreams: urls.map((url, i) => ({
            id: `up${i + 1}`,
            kind: "anthropic" as const,
            base_url: url,
            prices: { "claude-sonnet-4-5": { input: 3, output: 15 } },
          })),
          routes: [{
            model: "smart",
            candidates: urls.map((_, i) => ({
              upstream: `up${i + 1}`,
              model: "claude-sonnet-4-5",
            })),
          }],
        }),
      });
    } finally {
      await browser.close();
    }
  },
}, {
  parentName:
    "sessions panel in headless Chromium (in a child deno test --allow-all, for playwright)",
  ran: /ok \| 1 passed \| 0 failed/,
  what: "it ran",
});
