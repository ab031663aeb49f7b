/**
 * Fences in the admin page, in headless Chromium (docs/admin.md "Fences"): a session aborted
 * from the Sessions panel, its fence named with its expiry in the result line and listed in the
 * panel, lifted there, and the gateway answers the session again; a request aborted from the
 * live list, its turn fence listed, lifted from the result line, and the same turn answered.
 *
 * Like tests/admin_sessions_browser_test.ts, under the suite this file runs itself again in a
 * child `deno test --allow-all` (playwright-core needs it); only the child imports playwright.
 * The gateway runs at scale 1, so the page's "10 min" and the fence's expiry are the same time.
 */
import assert from "node:assert/strict";
import type { Locator, Page } from "playwright-core";
import type { FencesView } from "../admin/api_types.ts";
import { ADMIN, adminFetch } from "./admin_helpers.ts";
import { browserTest, launchChromium } from "./browser_child.ts";
import { chatWhole, contentThenSilence } from "./fake_upstreams/openai_chat_script.ts";
import { type Call, startFakeUpstream } from "./fake_upstreams/server.ts";
import { chatRoute, postJson, startTestGateway, type TestGateway } from "./harness.ts";

const WAIT = { timeout: 15_000 };
const KEY_A = { authorization: "Bearer key-a" };
const TURN = [{ role: "user", content: "write the file" }];

/** Streams a little and then hangs while streamed; answers whole otherwise. */
function answering(call: Call) {
  const json = call.json as { stream?: boolean };
  return json.stream ? contentThenSilence("partial") : chatWhole({ text: ["answered"] });
}

function chat(
  gw: TestGateway,
  opts: { session: string; stream?: boolean; id?: string },
): Promise<Response> {
  return postJson(
    `${gw.url}/v1/chat/completions`,
    { model: "smart", stream: opts.stream ?? false, messages: TURN },
    { ...KEY_A, "x-session-id": opts.session, ...(opts.id ? { "x-request-id": opts.id } : {}) },
  );
}

/**
 * A streamed request that has sent its first content: it runs until aborted; `rest` is what it
 * sends after (boxed: a promise returned as such would be awaited with this one).
 */
async function running(
  gw: TestGateway,
  opts: { id: string; session: string },
): Promise<{ rest: Promise<string> }> {
  const res = await chat(gw, { ...opts, stream: true });
  assert.equal(res.status, 200);
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("partial")) text += (await reader.read()).value ?? "";
  const rest = (async () => {
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += r.value;
    return text;
  })();
  return { rest };
}

async function fenceList(gw: TestGateway): Promise<FencesView> {
  const res = await adminFetch(gw, "/admin/api/fences");
  assert.equal(res.status, 200);
  return await res.json();
}

/** A Chat request a fence refuses: its code, at the status no agent retries (docs/design.md). */
async function assertRefused(res: Response, code: "gw.session.fenced" | "gw.turn.fenced") {
  assert.equal(res.headers.get("x-pulsegate-error-code"), code);
  assert.equal(res.status, 400);
  await res.body?.cancel();
}

async function assertAnswered(res: Response) {
  assert.equal(res.status, 200);
  assert.match(await res.text(), /answered/);
}

const text = async (locator: Locator) => ((await locator.textContent()) ?? "").trim();

browserTest(import.meta.url, {
  name: "fences in the admin page: seen after an abort, listed in the Sessions panel, lifted",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const browser = await launchChromium();
    const up = startFakeUpstream({ fallback: answering });
    try {
      await using gw = await startTestGateway({
        ...chatRoute([up.url], { failover: { idle_timeout_secs: 3600 } }),
        keys: [{ id: "a", key_env: "PULSEGATE_KEY_A" }],
      }, { env: { PULSEGATE_ADMIN_TOKEN: ADMIN, PULSEGATE_KEY_A: "key-a" }, scale: 1 });
      const context = await browser.newContext({ viewport: { width: 1180, height: 900 } });
      try {
        const page: Page = await context.newPage();
        page.on("pageerror", (err) => console.error(`page error: ${err.message}`));
        await page.goto(`${gw.url}/admin`);
        await page.getByLabel("Admin token").fill(ADMIN);
        await page.getByRole("button", { name: "Sign in" }).click();
        const sessions = page.locator("#sessions");
        const noFence = sessions.getByText("No fence is in force.");
        await noFence.waitFor(WAIT);

        // A session aborted from the Sessions panel: the confirmation says what its fence does.
        const stream = await running(gw, { id: "s-run", session: "agent-s" });
        await sessions.getByRole("button", { name: "Refresh" }).click();
        await sessions.locator('tr[data-session-id="agent-s"]')
          .getByRole("button", { name: "Abort session agent-s" }).click(WAIT);
        const prompt = sessions.getByRole("alertdialog");
        await prompt.getByText(
          "Its new requests, under every key, will be refused for 10 min, or until the fence is lifted.",
        ).waitFor(WAIT);
        await prompt.getByRole("button", { name: "Abort session agent-s" }).click();
        const result = sessions.getByRole("status");
        await result.getByText(/The session is fenced until/).waitFor(WAIT);
        assert.match(
          await text(result),
          // The page names the day too when the fence ends on another one (past midnight).
          /^Aborted session agent-s: 1 request stopped \(s-run\)\. The session is fenced until (\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d\./,
        );
        assert.match(await stream.rest, /gw\.request\.aborted/);
        const [fence, ...more] = (await fenceList(gw)).fences;
        assert.ok(fence && more.length === 0, "one fence");
        assert.equal(fence.kind, "session");
        assert.equal(fence.expiresAt - fence.createdAt, 600_000, "the 10 min the page promised");
        assert.equal(
          await result.locator("time").getAttribute("datetime"),
          new Date(fence.expiresAt).toISOString(),
          "the result line's expiry is the fence's",
        );
        const calls = up.calls.length;
        await assertRefused(await chat(gw, { session: "agent-s" }), "gw.session.fenced");
        assert.equal(up.calls.length, calls, "refused before any upstream call");

        // The panel lists it, and badges the session's row; Lift there, and the list empties.
        const listed = sessions.locator(`tr[data-fence-id="${fence.id}"]`);
        await listed.waitFor(WAIT);
        const cells = await text(listed);
        assert.match(cells, /session/);
        assert.match(cells, /every key/);
        assert.match(cells, /agent-s/);
        assert.match(cells, /in (9 m \d\d|10 m 00) s/, "the time left");
        await sessions.locator('tr[data-session-id="agent-s"]').getByText("fenced", { exact: true })
          .waitFor(WAIT);
        await listed.getByRole("button", { name: "Lift session fence agent-s" }).click();
        await noFence.waitFor(WAIT);
        await listed.waitFor({ state: "detached", ...WAIT });
        assert.deepEqual((await fenceList(gw)).fences, []);
        await assertAnswered(await chat(gw, { session: "agent-s" }));
        assert.equal(up.calls.length, calls + 1, "the upstream got the call");
        await result.getByRole("button", { name: "Dismiss" }).click();

        // A request aborted from the live list: its turn is fenced, listed, lifted from the
        // result line, and the same turn is answered again.
        const turn = await running(gw, { id: "t-run", session: "agent-t" });
        const live = page.locator("#live");
        await live.locator('tr[data-request-id="t-run"]')
          .getByRole("button", { name: "Abort request t-run" }).click(WAIT);
        const ask = live.getByRole("alertdialog");
        await ask.getByText(/Its turn will be refused if re-sent for 2 min, or until the fence is/)
          .waitFor(WAIT);
        await ask.getByRole("button", { name: "Abort request t-run" }).click();
        const aborted = live.getByRole("status");
        await aborted.getByText(/Its turn is fenced until/).waitFor(WAIT);
        assert.match(await text(aborted), /^Aborted request t-run: 1 request stopped \(t-run\)\./);
        assert.match(await turn.rest, /gw\.request\.aborted/);
        const before = up.calls.length;
        await assertRefused(await chat(gw, { session: "agent-t" }), "gw.turn.fenced");
        assert.equal(up.calls.length, before);
        const turnRow = sessions.locator('tr[data-fence-kind="turn"]');
        await turnRow.waitFor(WAIT);
        const turnCells = await text(turnRow);
        assert.match(turnCells, /t-run/);
        assert.match(turnCells, /agent-t/);
        assert.match(turnCells, /in (1 m \d\d|2 m 00) s/);
        assert.equal(await text(turnRow.locator('td[data-label="Key"]')), "a");
        await aborted.getByRole("button", { name: "Lift", exact: true }).click();
        await aborted.getByText("Fence lifted: its requests are answered again.").waitFor(WAIT);
        await noFence.waitFor(WAIT);
        assert.deepEqual((await fenceList(gw)).fences, []);
        await assertAnswered(await chat(gw, { session: "agent-t" }));
        assert.equal(up.calls.length, before + 1);
      } finally {
        await context.close();
      }
    } finally {
      await up.close();
      await browser.close();
    }
  },
}, {
  parentName: "fences in the admin page in headless Chromium (in a child deno test --allow-all)",
  ran: /ok \| 1 passed \| 0 failed/,
  what: "it ran",
});
