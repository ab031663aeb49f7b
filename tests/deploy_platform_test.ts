import assert from "node:assert/strict";
import { postJson } from "./harness.ts";
import { chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";
import { untilListening } from "./spawn_gateway.ts";
import { isLoopback, readSettings } from "../gateway/start/settings.ts";
import { openDatabase } from "../db/client.ts";
import { storeConfig } from "../db/config_store.ts";
import { migrate } from "../db/migrate.ts";
import { startFakeSqld } from "./fake_sqld.ts";

/**
 * docs/deploy.md: the gateway on a platform like Deno Deploy, run as `main.ts` with no FFI, no
 * file writes and no subprocesses, under the server's own config (deno.server.json).
 */
const ROOT = new URL("..", import.meta.url).pathname;

async function startRestricted(dir: string, env: Record<string, string>) {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--config",
      `${ROOT}/deno.server.json`,
      "--allow-net",
      "--allow-env",
      "--allow-read",
      "--allow-sys",
      "--deny-ffi",
      "--deny-write",
      "--deny-run",
      `${ROOT}/main.ts`,
    ],
    cwd: dir,
    env: { PULSEGATE_PORT: "0", PULSEGATE_TIME_SCALE: "0.01", NO_COLOR: "1", ...env },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  return { child, ...(await untilListening(child)) };
}

async function ask(url: string, id?: string): Promise<string> {
  const res = await postJson(`${url}/v1/chat/completions`, {
    model: "smart",
    messages: [{ role: "user", content: "hi" }],
  }, id ? { "x-request-id": id } : {});
  assert.equal(res.status, 200);
  const body = await res.json() as { choices: { message: { content: string } }[] };
  return body.choices[0]?.message.content ?? "";
}

async function readyz(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}/readyz`);
  return { status: res.status, body: await res.json() };
}

/** The number of history rows /readyz says are waiting in memory. */
function rowsKept(body: Record<string, unknown>): number {
  const match = String(body.history).match(/; (\d+) rows kept in memory/);
  assert.ok(match, `readyz names the rows kept: ${JSON.stringify(body)}`);
  return Number(match[1]);
}

async function withGateway(
  env: (dir: string, upstream: string) => Record<string, string>,
  fn: (gw: { url: string; log: string; dir: string }) => Promise<void>,
): Promise<void> {
  const up = startFakeUpstream({ fallback: () => chatWhole({ text: ["served"] }) });
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-deploy-" });
  await Deno.writeTextFile(
    `${dir}/config.json`,
    JSON.stringify({
      upstreams: [{ id: "up1", kind: "openai-chat", base_url: up.url }],
      routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "m" }] }],
    }),
  );
  const gw = await startRestricted(dir, env(dir, up.url));
  try {
    await fn({ url: gw.url, log: gw.log, dir });
  } finally {
    gw.child.kill("SIGTERM");
    const status = await gw.child.status;
    await up.close();
    await Deno.remove(dir, { recursive: true });
    assert.equal(status.code, 0, "stops cleanly");
  }
}

Deno.test("no FFI, no writes, no database URL: it serves, keeps history in memory and says so", async () => {
  await withGateway((dir) => ({ PULSEGATE_CONFIG: `${dir}/config.json` }), async (gw) => {
    assert.match(gw.log, /"event":"history.no_database"/);
    assert.equal(await ask(gw.url), "served", "the proxy works");
    const ready = await readyz(gw.url);
    assert.equal(ready.status, 200, "serving goes on");
    assert.match(String(ready.body.history), /^no database: .*no FFI/);
    const kept = rowsKept(ready.body);
    assert.ok(kept >= 1, "the request's rows are held in memory");
    assert.equal(await ask(gw.url, "second"), "served");
    assert.ok(rowsKept((await readyz(gw.url)).body) > kept, "each request adds its rows");
    const page = await (await fetch(`${gw.url}/admin/api/requests?route=smart`)).json() as {
      requests: { id: string; outcome: string; hops: { upstream: string; outcome: string }[] }[];
    };
    assert.equal(page.requests.length, 2, "the admin history lists both requests from memory");
    assert.equal(page.requests[0]?.id, "second", "newest first");
    assert.deepEqual(page.requests[0]?.hops.map((h) => [h.upstream, h.outcome]), [[
      "up1",
      "success",
    ]]);
    const detail = await fetch(`${gw.url}/admin/api/requests/second`);
    assert.equal(detail.status, 200);
    const { request, attempts } = await detail.json() as {
      request: { state: string; status: number };
      attempts: unknown[];
    };
    assert.deepEqual([request.state, request.status, attempts.length], ["closed", 200, 1]);
    const admin = await fetch(`${gw.url}/admin`);
    assert.equal(admin.status, 200, "the admin page is served");
    assert.match(
      await admin.text(),
      /role="alert">History is not being saved to a database: no database: .*no FFI/,
      "the admin page says so",
    );
    const stored = await fetch(`${gw.url}/admin/api/config`);
    assert.equal(stored.status, 503, "stored state cannot be read, and the answer says why");
    const { error } = await stored.json() as { error: { code: string; message: string } };
    assert.equal(error.code, "admin.database_unavailable");
    assert.match(error.message, /^no database: /);
    const live = await fetch(`${gw.url}/admin/api/live/snapshot`);
    assert.equal(live.status, 200, "the live view works from memory");
    await live.body?.cancel();
    assert.deepEqual([...Deno.readDirSync(gw.dir)].map((e) => e.name), ["config.json"]);
  });
});

Deno.test("a database URL on a closed port: requests are served, rows kept, /readyz reports it", async () => {
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = closed.addr.port;
  closed.close();
  await withGateway((dir) => ({
    PULSEGATE_CONFIG: `${dir}/config.json`,
    PULSEGATE_DB_URL: `http://127.0.0.1:${port}`,
  }), async (gw) => {
    assert.match(gw.log, /"event":"history.database_unreachable"/);
    assert.equal(await ask(gw.url), "served", "the config file runs though it is not stored");
    const ready = await readyz(gw.url);
    assert.equal(ready.status, 200, "it serves: it stays in the load balancer");
    assert.deepEqual([ready.body.ok, ready.body.serving], [false, true], "all is not well");
    assert.match(String(ready.body.reason), /^history database unreachable since \S+: /);
    assert.match(String(ready.body.history), /^history database unreachable since \S+: /);
    assert.ok(rowsKept(ready.body) >= 1, "the request's rows wait for the database");
    const admin = await fetch(`${gw.url}/admin`);
    assert.match(await admin.text(), /History is not being saved to a database: history database/);
  });
});

Deno.test("a remote database that comes back: the catch-up runs and the kept rows land", async () => {
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = closed.addr.port;
  closed.close();
  await withGateway((dir) => ({
    PULSEGATE_CONFIG: `${dir}/config.json`,
    PULSEGATE_DB_URL: `http://127.0.0.1:${port}`,
  }), async (gw) => {
    assert.equal(await ask(gw.url, "early"), "served");
    assert.ok(rowsKept((await readyz(gw.url)).body) >= 1);
    // The server comes up where the URL points; the gateway uses the web client (no FFI).
    const sqld = startFakeSqld(`${gw.dir}/remote.db`, { port });
    const db = await openDatabase(`file:${gw.dir}/remote.db`, { busyTimeoutMs: 5_000 });
    try {
      const deadline = Date.now() + 15_000;
      while ((await readyz(gw.url)).body.history !== undefined) {
        assert.ok(Date.now() < deadline, "the gateway never saw the database come back");
        await new Promise((r) => setTimeout(r, 20));
      }
      const row = async (id: string) =>
        (await db.client.execute({ sql: "SELECT state FROM requests WHERE id = ?", args: [id] }))
          .rows[0]?.state;
      while (await row("early") === undefined) {
        assert.ok(Date.now() < deadline, "the kept row never landed");
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal(await row("early"), "closed", "the row kept in memory is written");
      const config = await db.client.execute("SELECT version FROM config");
      assert.equal(config.rows[0]?.version, 1, "the config file was stored on the way back");
      const instance = await db.client.execute("SELECT url FROM instances");
      // Registered, with no address: without a peer secret no abort is forwarded to it
      // (docs/scaling.md).
      assert.deepEqual(instance.rows.map((r) => r.url), [null], "the instance registered");
      const view = await (await fetch(`${gw.url}/admin/api/config`)).json();
      assert.deepEqual([view.version, view.runningVersion], [1, 1]);
      assert.equal(await ask(gw.url, "late"), "served");
      while (await row("late") !== "closed") {
        assert.ok(Date.now() < deadline, "a new row never landed");
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.match(gw.log, /history.database_unreachable/);
    } finally {
      db.close();
      await sqld.close();
    }
  });
});

Deno.test("no config file and the database away: safe mode, then the stored config when it answers", async () => {
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = closed.addr.port;
  closed.close();
  await withGateway((_dir) => ({ PULSEGATE_DB_URL: `http://127.0.0.1:${port}` }), async (gw) => {
    const refused = await postJson(`${gw.url}/v1/chat/completions`, {
      model: "smart",
      messages: [{ role: "user", content: "hi" }],
    });
    assert.equal(refused.status, 503, "no demo for real clients: the stored config is unknown");
    await refused.body?.cancel();
    assert.match(String((await readyz(gw.url)).body.reason), /database is unreachable/);
    // What another instance stored before the outage.
    const config = JSON.parse(await Deno.readTextFile(`${gw.dir}/config.json`));
    const db = await openDatabase(`file:${gw.dir}/remote.db`, { busyTimeoutMs: 5_000 });
    await migrate(db);
    await storeConfig(db, config, { now: Date.now() });
    db.close();
    const sqld = startFakeSqld(`${gw.dir}/remote.db`, { port });
    try {
      const deadline = Date.now() + 15_000;
      while (!(await readyz(gw.url)).body.ok) {
        assert.ok(Date.now() < deadline, "the stored config never came into force");
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal(await ask(gw.url), "served", "the stored config runs");
    } finally {
      await sqld.close();
    }
  });
});

Deno.test("on Deno Deploy the gateway never takes itself for loopback-only", () => {
  const deploy = readSettings((name) => name === "DENO_DEPLOYMENT_ID" ? "abc123" : undefined);
  assert.equal(deploy.host, "0.0.0.0");
  assert.equal(isLoopback(deploy.host), false, "keys and the admin token are required");
  assert.equal(readSettings(() => undefined).host, "127.0.0.1", "elsewhere the default stays");
});
