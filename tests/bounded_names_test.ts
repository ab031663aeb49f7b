import assert from "node:assert/strict";
import { Hono } from "hono";
import { databaseErrorHandler } from "../admin/database_errors.ts";
import { MAX_COST_GROUPS } from "../db/cost_queries.ts";
import { MAX_READ_CHARS } from "../db/history_rows.ts";
import { MAX_MODEL_CHARS } from "../gateway/formats/bounded_names.ts";
import { chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";
import { postJson, startTestGateway, type TestGateway } from "./harness.ts";

/**
 * A client's names are bounded before they are stored or echoed, and the admin API's answers
 * stay bounded JSON whatever the rows hold (docs/security.md "Names are bounded").
 */

const MB = 1024 * 1024;

async function withGateway(run: (gw: TestGateway) => Promise<void>): Promise<number> {
  const up = startFakeUpstream({ fallback: () => chatWhole({ text: ["ok"] }) });
  const gw = await startTestGateway({
    upstreams: [{ id: "up", kind: "openai-chat", base_url: up.url }],
    routes: [{ model: "smart", candidates: [{ upstream: "up", model: "m" }] }],
    // Real time: a 12 MB body's deadline is its real 300 s cap, not 3 s of a scaled clock.
  }, { scale: 1 });
  try {
    await run(gw);
  } finally {
    await gw.stop();
    await up.close();
  }
  return up.calls.length;
}

/** An unknown model of `chars` characters, named as each client format names it. */
function unknownModel(chars: number): { name: string; path: string; body: unknown }[] {
  const model = "m".repeat(chars);
  return [
    {
      name: "OpenAI chat",
      path: "/v1/chat/completions",
      body: { model, messages: [{ role: "user", content: "hi" }] },
    },
    { name: "Responses", path: "/v1/responses", body: { model, input: "hi" } },
    {
      name: "Anthropic",
      path: "/v1/messages",
      body: { model, max_tokens: 5, messages: [{ role: "user", content: "hi" }] },
    },
  ];
}

Deno.test("a 12 MB model name: a bounded row and answer in every format, and the history answers", async () => {
  const calls = await withGateway(async (gw) => {
    // Gemini names its model in the path, which the HTTP layer caps far below 12 MB.
    const gemini = {
      name: "Gemini path",
      path: `/v1beta/models/${"g".repeat(60_000)}:generateContent`,
      body: { contents: [{ parts: [{ text: "hi" }] }] },
    };
    for (const c of [...unknownModel(12 * MB), gemini]) {
      const res = await postJson(`${gw.url}${c.path}`, c.body);
      const text = await res.text();
      assert.equal(res.status, 404, c.name);
      assert.equal(res.headers.get("x-pulsegate-error-code"), "gw.client.unknown_model", c.name);
      assert.ok(text.length < 1_000, `${c.name}: the answer is ${text.length} characters`);
      assert.match(text, /characters\)/, `${c.name}: the answer says how long the name was`);
      const { request } = await gw.row(res.headers.get("x-request-id")!);
      assert.ok(request.route!.length <= MAX_MODEL_CHARS, `${c.name}: route is bounded`);
      assert.ok(request.errorMessage!.length < 1_000, `${c.name}: error_message is bounded`);
    }
    const history = await fetch(`${gw.url}/admin/api/requests?limit=200`);
    const page = await history.text();
    assert.equal(history.status, 200);
    assert.equal(JSON.parse(page).requests.length, 4);
    assert.ok(page.length < 20_000, `the history page is ${page.length} characters`);
  });
  assert.equal(calls, 0);
});

Deno.test("rows stored unbounded (older rows): history, a request's detail and costs stay bounded JSON", async () => {
  await withGateway(async (gw) => {
    // As a gateway without the bound stored them: megabytes of route and error message per row.
    const name = "n".repeat(4 * MB);
    for (let i = 0; i < MAX_COST_GROUPS + 20; i++) {
      const big = i < 3;
      await gw.db.client.execute({
        sql: `INSERT INTO requests (id, instance_id, state, started_at, client_format, route,
          stream, status, error_code, error_message) VALUES (?, 'old', 'closed', ?, 'openai-chat',
          ?, 0, 404, 'gw.client.unknown_model', ?)`,
        args: [
          `old-${i}`,
          Date.now() - 1_000 + i,
          big ? `${i}${name}` : `junk-${i}`,
          big ? name : "",
        ],
      });
    }
    const history = await fetch(`${gw.url}/admin/api/requests?limit=200`);
    const page = await history.text();
    assert.equal(history.status, 200);
    const rows = JSON.parse(page).requests as { route: string; errorMessage: string }[];
    assert.equal(rows.length, MAX_COST_GROUPS + 20);
    for (const row of rows) {
      assert.ok(row.route.length <= MAX_READ_CHARS && row.errorMessage.length <= MAX_READ_CHARS);
    }
    assert.ok(page.length < 2 * MB, `the history page is ${page.length} characters`);

    const detail = await fetch(`${gw.url}/admin/api/requests/old-0`);
    assert.equal(detail.status, 200);
    assert.ok((await detail.text()).length < 10_000);

    const costs = await fetch(`${gw.url}/admin/api/costs?by=route&since=0`);
    const report = await costs.text();
    assert.equal(costs.status, 200);
    const totals = JSON.parse(report).totals as { group: string; requests: number }[];
    assert.equal(totals.length, MAX_COST_GROUPS + 1);
    assert.equal(totals.at(-1)!.group, "20 more");
    assert.equal(totals.reduce((sum, t) => sum + t.requests, 0), MAX_COST_GROUPS + 20);
    assert.ok(report.length < 100_000, `the cost report is ${report.length} characters`);
  });
});

Deno.test("an unexpected failure in the admin API is JSON in the admin's error shape", async () => {
  const app = new Hono();
  const logged: unknown[] = [];
  app.onError(
    databaseErrorHandler({ notice: () => null, log: { event: (...e) => logged.push(e) } }),
  );
  app.get("/admin/api/boom", () => {
    throw new RangeError("Invalid string length");
  });
  const res = await app.request("/admin/api/boom");
  assert.equal(res.status, 500);
  assert.match(res.headers.get("content-type") ?? "", /application\/json/);
  const body = await res.json();
  assert.equal(body.error.code, "admin.internal");
  assert.match(body.error.message, /Invalid string length/);
  assert.deepEqual(logged, [["admin.internal", {
    path: "/admin/api/boom",
    error: "Invalid string length",
  }]]);
});

Deno.test("admin documents (guardrails, destinations) are read with a size limit and the JSON guard", async () => {
  await withGateway(async (gw) => {
    const put = (path: string, body: string, method = "PUT") =>
      fetch(`${gw.url}${path}`, { method, headers: { "content-type": "application/json" }, body });
    const large = await put(
      "/admin/api/guardrails",
      JSON.stringify({ enabled: true, padding: "x".repeat(2 * MB) }),
    );
    assert.equal(large.status, 413);
    assert.equal((await large.json()).error.code, "gw.client.body_too_large");
    const deep = await put(
      "/admin/api/destinations",
      `{"kind":"otlp","x":${"[".repeat(500)}${"]".repeat(500)}}`,
      "POST",
    );
    assert.equal(deep.status, 400);
    const answer = await deep.json();
    assert.equal(answer.error.code, "gw.client.invalid_json");
    assert.match(answer.error.message, /nests deeper than 128 levels/);
    const fine = await put("/admin/api/guardrails", JSON.stringify({ enabled: true }));
    assert.equal(fine.status, 200);
    await fine.body?.cancel();
  });
});
