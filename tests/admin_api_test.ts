import assert from "node:assert/strict";
import type {
  ConfigView,
  HealthView,
  HistoryPage,
  RequestDetail,
  SessionInfo,
} from "../admin/api_types.ts";
import type { RetentionView } from "../admin/retention_types.ts";
import { loadStoredConfig } from "../db/config_store.ts";
import type { ConfigInput } from "../gateway/config/schema.ts";
import {
  adminFetch,
  dirWithStoredConfig,
  eventually,
  streamingRequest,
  waitForSnapshot,
} from "./admin_helpers.ts";
import { ADMIN } from "./admin_helpers.ts";
import {
  chatError,
  chatStream,
  chatWhole,
  contentThenSilence,
  silentAfterHeaders,
} from "./fake_upstreams/openai_chat_script.ts";
import { type FakeUpstream, startFakeUpstream } from "./fake_upstreams/server.ts";
import { chatRoute, postJson, startTestGateway, type TestGateway, withGateway } from "./harness.ts";

// 36 s at the test scale: a hanging request stays live until the test ends it.
const patient = { idle_timeout_secs: 3600, retries_per_candidate: 0 };
const ask = (stream: boolean) => ({
  model: "smart",
  stream,
  messages: [{ role: "user", content: "hi" }],
});
const good = { text: ["good ", "answer"], usage: { input: 7, output: 2 } };

/** `count` fake upstreams behind a gateway with the admin token (unless `token: false`). */
function withUpstreams(
  count: number,
  run: (gw: TestGateway, ups: FakeUpstream[]) => Promise<void>,
  opts: { config?: (urls: string[]) => ConfigInput; token?: boolean } = {},
): Promise<void> {
  return withGateway(run, {
    upstreams: count,
    config: (urls) => opts.config?.(urls) ?? chatRoute(urls, { failover: patient }),
    env: opts.token === false ? {} : { PULSEGATE_ADMIN_TOKEN: ADMIN },
  });
}

Deno.test("admin API refuses a missing or wrong token, and says which", async () => {
  await withUpstreams(1, async (gw) => {
    for (const path of ["/admin/api/session", "/admin/api/live", "/admin/api/requests"]) {
      const missing = await adminFetch(gw, path, { token: null });
      assert.equal(missing.status, 401, path);
      assert.equal((await missing.json()).error.message, "admin token required");
      const wrong = await adminFetch(gw, path, { token: "nope" });
      assert.equal(wrong.status, 401, path);
      assert.equal((await wrong.json()).error.message, "wrong admin token");
    }
    const ok = await adminFetch(gw, "/admin/api/session");
    assert.equal(ok.status, 200);
    const info: SessionInfo = await ok.json();
    assert.equal(info.tokenRequired, true);
    assert.equal(info.safeMode, false);
  });
});

Deno.test("with no admin token on loopback the admin API is open", async () => {
  await withUpstreams(1, async (gw) => {
    const res = await adminFetch(gw, "/admin/api/session", { token: null });
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as SessionInfo).tokenRequired, false);
  }, { token: false });
});

Deno.test("live feed: a streaming request shows its upstream, hop, state, idle time and session", async () => {
  await withUpstreams(1, async (gw, [up]) => {
    up!.setHandler(() => contentThenSilence("partial "));
    const { rest } = await streamingRequest(gw, {
      "x-request-id": "live-1",
      "x-session-id": "sess-1",
    });
    const snapshot = await waitForSnapshot(
      gw,
      (s) => s.requests.some((r) => r.id === "live-1" && r.state === "streaming"),
    );
    const row = snapshot.requests.find((r) => r.id === "live-1")!;
    assert.equal(row.sessionId, "sess-1");
    assert.equal(row.keyId, null, "the key that made it (none: open proxy)");
    assert.equal(row.clientFormat, "openai-chat");
    assert.equal(row.route, "smart");
    assert.equal(row.upstream, "up1");
    assert.equal(row.hop, 1);
    assert.equal(row.stream, true);
    assert.equal(row.aborting, false);
    assert.ok(row.idleMs !== null && row.idleMs >= 0, "content was sent, so idle time counts");
    assert.ok(row.elapsedMs >= row.idleMs!);
    await gw.writer.flush();
    const open: HistoryPage = await (await adminFetch(gw, "/admin/api/requests")).json();
    const running = open.requests.find((r) => r.id === "live-1");
    assert.equal(running?.state, "open");
    assert.equal(running?.route, "smart", "a running request shows what is known of it now");
    assert.deepEqual(running?.hops.map((h) => [h.upstream, h.outcome]), [["up1", null]]);
    const one = await adminFetch(gw, "/admin/api/live/snapshot");
    assert.deepEqual((await one.json()).requests.map((r: { id: string }) => r.id), ["live-1"]);
    const abort = await fetch(`${gw.url}/request/live-1/abort`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    assert.deepEqual((await abort.json()).requests, ["live-1"]);
    assert.match(await rest, /gw\.request\.aborted/);
    await waitForSnapshot(gw, (s) => s.requests.length === 0);
  });
});

Deno.test("live feed: the stream ends when the gateway stops, so an open tab never holds shutdown", async () => {
  const up = startFakeUpstream();
  const gw = await startTestGateway(chatRoute([up.url]), {
    env: { PULSEGATE_ADMIN_TOKEN: ADMIN },
  });
  try {
    const res = await adminFetch(gw, "/admin/api/live");
    assert.equal(res.headers.get("content-type"), "text/event-stream; charset=utf-8");
    const body = res.text();
    await gw.stop();
    assert.match(await body, /event: snapshot/);
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("history: filters, keyset pages and each request's attempt chain", async () => {
  await withUpstreams(2, async (gw, [a, b]) => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      // Requests 0, 2 and 4 fail over from a 500 on up1; 1 and 3 are answered by up1.
      a!.enqueue(i % 2 === 0 ? chatError(500, "boom") : chatStream(good));
      if (i % 2 === 0) b!.enqueue(chatStream(good));
      const id = `hist-${i}`;
      const res = await postJson(`${gw.url}/v1/chat/completions`, ask(true), {
        "x-request-id": id,
        "x-session-id": i < 2 ? "s-early" : "s-late",
      });
      await res.text();
      await gw.row(id);
      ids.push(id);
      await new Promise((r) => setTimeout(r, 2)); // distinct start times
    }
    const page = async (query: string): Promise<HistoryPage> => {
      const res = await adminFetch(gw, `/admin/api/requests?${query}`);
      assert.equal(res.status, 200, query);
      return await res.json();
    };
    const first = await page("limit=2");
    assert.deepEqual(first.requests.map((r) => r.id), ["hist-4", "hist-3"]);
    assert.ok(first.next);
    const second = await page(
      `limit=2&before_at=${first.next.startedAt}&before_id=${first.next.id}`,
    );
    assert.deepEqual(second.requests.map((r) => r.id), ["hist-2", "hist-1"]);
    const third = await page(
      `limit=2&before_at=${second.next!.startedAt}&before_id=${second.next!.id}`,
    );
    assert.deepEqual(third.requests.map((r) => r.id), ["hist-0"]);
    assert.equal(third.next, null);

    const failedOver = first.requests[0]!;
    assert.deepEqual(
      failedOver.hops.map((h) => [h.upstream, h.outcome, h.status]),
      [["up1", "error", 500], ["up2", "success", 200]],
    );
    assert.deepEqual((await page("upstream=up1")).requests.map((r) => r.id), ["hist-3", "hist-1"]);
    assert.deepEqual(
      (await page("session=s-early")).requests.map((r) => r.id),
      ["hist-1", "hist-0"],
    );
    assert.equal((await page("route=smart")).requests.length, 5);
    assert.equal((await page("route=other")).requests.length, 0);
    assert.equal((await page("outcome=error")).requests.length, 0);
    assert.equal((await page("outcome=success")).requests.length, 5);
    const at = (await page("")).requests.find((r) => r.id === "hist-2")!.startedAt;
    assert.deepEqual(
      (await page(`since=${at}&until=${at + 1}`)).requests.map((r) => r.id),
      ["hist-2"],
    );
    for (const bad of ["outcome=maybe", "since=yesterday", "before_at=1"]) {
      const res = await adminFetch(gw, `/admin/api/requests?${bad}`);
      assert.equal(res.status, 400, bad);
      assert.equal((await res.json()).error.code, "admin.bad_query");
    }

    const detail = await adminFetch(gw, "/admin/api/requests/hist-4");
    const { request, attempts }: RequestDetail = await detail.json();
    assert.equal(request.status, 200);
    assert.equal(request.upstream, "up2");
    assert.deepEqual(
      attempts.map((x) => [x.hop, x.upstream, x.outcome, x.status]),
      [[1, "up1", "error", 500], [2, "up2", "success", 200]],
    );
    assert.equal(attempts[1]!.inputTokens, 7);
    const missing = await adminFetch(gw, "/admin/api/requests/nope");
    assert.equal(missing.status, 404);
  });
});

Deno.test("health: slots in use, cooldown with its end, recent failures and latency", async () => {
  await withUpstreams(2, async (gw, [a, b]) => {
    a!.setHandler(() => chatError(500, "down"));
    b!.setHandler(() => chatStream(good));
    for (let i = 0; i < 2; i++) {
      const res = await postJson(`${gw.url}/v1/chat/completions`, ask(true));
      await res.text();
      await gw.row(res.headers.get("x-request-id")!);
    }
    b!.setHandler(() => silentAfterHeaders);
    // up1 is paused now, so this one goes straight to up2 and hangs there.
    const hanging = postJson(`${gw.url}/v1/chat/completions`, ask(true), {
      "x-request-id": "hang",
    });
    await eventually(() => gw.slots.inFlight("up2") === 1);
    const res = await adminFetch(gw, "/admin/api/health");
    const view: HealthView = await res.json();
    const [up1, up2] = view.upstreams;
    assert.equal(up1!.id, "up1");
    assert.equal(up1!.paused, true);
    assert.ok(up1!.pausedUntil! > view.at, "the pause ends in the future");
    assert.equal(up1!.pauseCount, 1);
    assert.equal(up1!.recent.failures, 2);
    assert.equal(up1!.recent.successes, 0);
    assert.equal(up2!.inFlight, 1);
    assert.equal(up2!.maxInFlight, 64);
    assert.equal(up2!.paused, false);
    assert.equal(up2!.recent.successes, 2);
    assert.ok(up2!.recent.firstContentP50Ms !== null);
    await fetch(`${gw.url}/request/hang/abort`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}` },
    }).then((r) => r.body?.cancel());
    await (await hanging).body?.cancel();
  }, {
    config: (urls) =>
      chatRoute(urls, { failover: { ...patient, failures_to_pause: 2, pause_secs: 600 } }),
  });
});

Deno.test("health controls: the pause's reason, resume at once, disable and enable an upstream", async () => {
  await withUpstreams(2, async (gw, [a, b]) => {
    a!.setHandler(() => chatError(500, "down"));
    b!.setHandler(() => chatWhole(good));
    const ask1 = async () => {
      const res = await postJson(`${gw.url}/v1/chat/completions`, ask(false));
      assert.equal(res.status, 200);
      await res.text();
    };
    const health = async () =>
      (await (await adminFetch(gw, "/admin/api/health")).json()) as HealthView;
    const control = (id: string, action: string) =>
      adminFetch(gw, `/admin/api/upstreams/${id}/${action}`, { body: {} });
    await ask1();
    let up1 = (await health()).upstreams[0]!;
    assert.equal(up1.paused, true);
    assert.equal(up1.pauseReason, "1 failure in a row; last: gw.upstream.error");
    await ask1();
    assert.equal(a!.calls.length, 1, "paused: up1 is skipped");

    const resumed = await control("up1", "resume");
    assert.equal(resumed.status, 200);
    up1 = (await health()).upstreams[0]!;
    assert.equal(up1.paused, false);
    assert.equal(up1.pauseReason, null);
    a!.setHandler(() => chatWhole(good));
    await ask1();
    assert.equal(a!.calls.length, 2, "resumed: up1 is tried again at once");

    assert.equal((await control("up1", "disable")).status, 200);
    await ask1();
    assert.equal(a!.calls.length, 2, "disabled: no route sends to up1");
    assert.equal((await health()).upstreams[0]!.enabled, false);
    const stored = await loadStoredConfig(gw.db);
    const body = stored!.body as { upstreams: { id: string; enabled?: boolean }[] };
    assert.equal(body.upstreams.find((u) => u.id === "up1")!.enabled, false, "stored");

    assert.equal((await control("up1", "enable")).status, 200);
    await ask1();
    assert.equal(a!.calls.length, 3, "enabled again");
    const unknown = await control("nope", "resume");
    assert.equal(unknown.status, 404);
    assert.equal((await unknown.json()).error.code, "admin.upstream_not_found");
    assert.equal((await control("nope", "disable")).status, 404);
  }, {
    config: (urls) =>
      chatRoute(urls, { failover: { ...patient, failures_to_pause: 1, pause_secs: 600 } }),
  });
});

Deno.test("config: a save is validated as a whole, each problem at its key path, and applied at once", async () => {
  await withUpstreams(1, async (gw, [up]) => {
    up!.setHandler(() => chatStream(good));
    const before: ConfigView = await (await adminFetch(gw, "/admin/api/config")).json();
    assert.equal(before.source, "stored");
    assert.equal(before.safeMode, null);
    const doc = before.config as ConfigInput;

    const bad = {
      ...doc,
      failover: { ...doc.failover, idle_timeout_secs: 5, idle_timeout: 30 },
    };
    const refused = await adminFetch(gw, "/admin/api/config", { method: "PUT", body: bad });
    assert.equal(refused.status, 400);
    const body = await refused.json();
    assert.equal(body.error.code, "config.invalid");
    assert.deepEqual(
      body.problems.map((p: { path: string }) => p.path).sort(),
      ["failover.idle_timeout", "failover.idle_timeout_secs"],
    );
    assert.match(JSON.stringify(body.problems), /did you mean \\"idle_timeout_secs\\"/);
    assert.deepEqual((await loadStoredConfig(gw.db))?.body, doc, "nothing was stored");

    const checked = await adminFetch(gw, "/admin/api/config/validate", { body: bad });
    assert.equal((await checked.json()).ok, false);

    const renamed = { ...doc, routes: [{ ...doc.routes[0]!, model: "renamed" }] };
    const saved = await adminFetch(gw, "/admin/api/config", { method: "PUT", body: renamed });
    assert.equal(saved.status, 200);
    assert.deepEqual((await loadStoredConfig(gw.db))?.body, renamed);
    const old = await postJson(`${gw.url}/v1/chat/completions`, ask(false));
    assert.equal(old.status, 404, "the old route is gone at once");
    await old.body?.cancel();
    const now = await postJson(`${gw.url}/v1/chat/completions`, { ...ask(true), model: "renamed" });
    assert.equal(now.status, 200);
    await now.text();

    const patched = await adminFetch(gw, "/admin/api/config", {
      method: "PATCH",
      body: { failover: { idle_timeout_secs: 60 } },
    });
    assert.equal(patched.status, 200);
    const stored = (await loadStoredConfig(gw.db))?.body as ConfigInput;
    assert.equal(stored.failover?.idle_timeout_secs, 60);
    assert.equal(stored.routes[0]!.model, "renamed", "a patch keeps what it does not name");
    assert.equal(gw.state.config?.failover.idle_timeout_secs, 60);
    const badPatch = await adminFetch(gw, "/admin/api/config", {
      method: "PATCH",
      body: { upstreams: null },
    });
    assert.equal(badPatch.status, 400);
    assert.deepEqual((await badPatch.json()).problems.map((p: { path: string }) => p.path), [
      "upstreams",
    ]);
  });
});

Deno.test("config: bodies that are not JSON are refused without touching the config", async () => {
  await withUpstreams(1, async (gw) => {
    const plain = await fetch(`${gw.url}/admin/api/config`, {
      method: "PUT",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "text/plain" },
      body: "{}",
    });
    assert.equal(plain.status, 415, "a form post from another site cannot reach it");
    await plain.body?.cancel();
    const broken = await fetch(`${gw.url}/admin/api/config`, {
      method: "PUT",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: "{not json",
    });
    assert.equal(broken.status, 400);
    assert.equal((await broken.json()).error.code, "gw.client.invalid_json");
    const repair = await adminFetch(gw, "/admin/api/config/repair", { body: { actions: 3 } });
    assert.equal(repair.status, 400);
    assert.equal((await repair.json()).error.code, "admin.bad_repair");
    const nothing = await adminFetch(gw, "/admin/api/config/repair", { body: {} });
    assert.equal(nothing.status, 409);
    assert.equal((await nothing.json()).error.code, "config.nothing_to_repair");
  });
});

Deno.test("safe mode: the config view names each problem and the repair, which resumes proxying", async () => {
  const up = startFakeUpstream({ fallback: () => chatStream(good) });
  const stored = chatRoute([up.url]);
  const dir = await dirWithStoredConfig({
    ...stored,
    failover: { idle_timeout: 30 },
    extra: true,
  });
  const gw = await startTestGateway(undefined, { dir, env: { PULSEGATE_ADMIN_TOKEN: ADMIN } });
  try {
    const refused = await postJson(`${gw.url}/v1/chat/completions`, ask(false));
    assert.equal(refused.status, 503);
    assert.equal((await refused.json()).error.code, "config.invalid");
    const view: ConfigView = await (await adminFetch(gw, "/admin/api/config")).json();
    assert.ok(view.safeMode);
    assert.deepEqual(view.safeMode.problems.map((p) => p.path).sort(), [
      "extra",
      "failover.idle_timeout",
    ]);
    assert.deepEqual(
      view.safeMode.repair?.map((a) => [a.op, a.path]).sort(),
      [["delete", "extra"], ["delete", "failover.idle_timeout"]],
    );
    const session: SessionInfo = await (await adminFetch(gw, "/admin/api/session")).json();
    assert.equal(session.safeMode, true);

    // A repair that leaves a problem behind is refused and stores nothing.
    const half = await adminFetch(gw, "/admin/api/config/repair", {
      body: { actions: view.safeMode.repair!.filter((a) => a.path === "extra") },
    });
    assert.equal(half.status, 409);
    assert.deepEqual((await half.json()).problems.map((p: { path: string }) => p.path), [
      "failover.idle_timeout",
    ]);

    const repaired = await adminFetch(gw, "/admin/api/config/repair", {
      body: { actions: view.safeMode.repair },
    });
    assert.equal(repaired.status, 200);
    assert.deepEqual((await loadStoredConfig(gw.db))?.body, { ...stored, failover: {} });
    assert.equal(gw.state.safeModeReason, null);
    const ok = await postJson(`${gw.url}/v1/chat/completions`, ask(true));
    assert.equal(ok.status, 200, "proxying resumed");
    assert.match(await ok.text(), /good /);
    assert.equal((await (await fetch(`${gw.url}/readyz`)).json()).ok, true);
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("the page is served from memory with its hashed assets and a strict policy", async () => {
  await withUpstreams(1, async (gw) => {
    const page = await fetch(`${gw.url}/admin`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get("content-security-policy") ?? "", /frame-ancestors 'none'/);
    const html = await page.text();
    const script = html.match(/src="(\/admin\/assets\/admin-[0-9a-f]{12}\.js)"/)?.[1];
    const style = html.match(/href="(\/admin\/assets\/admin-[0-9a-f]{12}\.css)"/)?.[1];
    assert.ok(script && style, "the shell names both assets");
    const js = await fetch(`${gw.url}${script}`);
    assert.equal(js.headers.get("content-type"), "text/javascript; charset=utf-8");
    assert.match(js.headers.get("cache-control") ?? "", /immutable/);
    assert.match(await js.text(), /admin\/api\/live/);
    const css = await fetch(`${gw.url}${style}`);
    assert.equal(css.headers.get("content-type"), "text/css; charset=utf-8");
    await css.body?.cancel();
    const missing = await fetch(`${gw.url}/admin/assets/nope.js`);
    assert.equal(missing.status, 404);
    await missing.body?.cancel();
  });
});

Deno.test("history retention: what is kept and from when, and the last prune", async () => {
  await withUpstreams(1, async (gw, [up]) => {
    up!.enqueue(chatStream(good));
    const res = await postJson(`${gw.url}/v1/chat/completions`, ask(true), {
      "x-request-id": "kept-1",
    });
    await res.text();
    const { request } = await gw.row("kept-1");
    // The first prune runs at start; the view reads the file as it is now.
    let view: RetentionView | null = null;
    await eventually(async () => {
      const answer = await adminFetch(gw, "/admin/api/history/retention");
      assert.equal(answer.status, 200);
      view = await answer.json() as RetentionView;
      return view.lastPrune !== null;
    }, { what: "the start's prune has run" });
    assert.ok(view);
    const seen: RetentionView = view;
    assert.equal(seen.retentionDays, 30);
    assert.equal(seen.rollupRetentionDays, 400);
    assert.equal(seen.oldestStartedAt, request.startedAt);
    assert.equal(seen.requestsApprox, 1);
    assert.ok(seen.bytes > 0 && seen.bytes % 4096 === 0, `bytes: ${seen.bytes}`);
    assert.equal(seen.autoVacuum, "incremental", "a new file gives free pages back");
    assert.equal(seen.lastPrune!.requests, 0);
    assert.equal(seen.lastError, null);
  });
});
