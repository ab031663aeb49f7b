import assert from "node:assert/strict";
import { openDatabase } from "../db/client.ts";
import { getRequest } from "../db/history_queries.ts";
import { chatStreamHeld } from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";
import { chatRoute, eventually, freePort, postJson } from "./harness.ts";
import { requestEnded } from "../gateway/start/client_connections.ts";
import { CONNECTION_DEFAULTS, readSettings } from "../gateway/start/settings.ts";
import { narrowPermissions } from "./spawn_gateway.ts";

/**
 * docs/security.md "Connection floods": a gateway process under a small descriptor limit, flooded
 * with connections that never finish their headers, stays up, finishes the stream it was serving
 * (its row closed and billed), answers /healthz again and closes every flood connection; over its
 * connection cap a newcomer gets 503 in its format; headers and keep-alive bounds close sockets.
 */

const ROOT = new URL("..", import.meta.url).pathname;
const ASK = { model: "smart", stream: true, messages: [{ role: "user", content: "q" }] };
const HALF_HEADERS = new TextEncoder().encode("GET /healthz HTTP/1.1\r\nHost: x\r\n");

Deno.test("a descriptor flood: the gateway lives, its live stream ends billed, /healthz comes back", async () => {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  await using up = startFakeUpstream({
    fallback: () =>
      chatStreamHeld({ text: ["hel", "lo"], usage: { input: 3, output: 2 } }, released),
  });
  await using gw = await spawnLimited({
    upstream: up.url,
    // Below the flood: the process runs out of descriptors (160 of them, about 40 in use at start).
    nofile: 160,
    env: { PULSEGATE_HEADERS_TIMEOUT_MS: "1000", PULSEGATE_KEEP_ALIVE_TIMEOUT_MS: "1000" },
  });
  await using _ = { [Symbol.asyncDispose]: () => Promise.resolve(release()) };
  const baseline = await fdCount(gw.pid);

  const live = await postJson(`${gw.url}/v1/chat/completions`, ASK, { "x-request-id": "live" });
  assert.equal(live.status, 200);
  const stream = live.body!.pipeThrough(new TextDecoderStream()).getReader();
  let received = "";
  while (!received.includes("hel")) received += (await stream.read()).value ?? "";

  await using flood = await openFlood(gw.port, 200);
  await gw.until("gateway.accept_failed");
  assert.equal(gw.exited, null, "the gateway is alive after running out of descriptors");

  release();
  for (let chunk = await stream.read(); !chunk.done; chunk = await stream.read()) {
    received += chunk.value;
  }
  assert.match(received, /"content":"lo"/);
  assert.match(received, /data: \[DONE\]/);

  await eventually(() => healthy(gw.url), { what: "/healthz answers during the flood" });
  await eventually(() => flood.closed === flood.size, {
    what: "every flood connection closed by the gateway",
  });
  // The flood's ~120 sockets are gone; what may remain is the upstream pool's connection and the
  // test's own keep-alive connections to the gateway (closed by the 1 s keep-alive bound).
  await eventually(async () => (await fdCount(gw.pid)) <= baseline + 3, {
    what: `descriptors back near the ${baseline} held before the flood`,
  });

  const row = await gw.row("live");
  assert.equal(row?.state, "closed");
  assert.equal(row?.status, 200);
  assert.equal(row?.outcome, "success");
  assert.equal(row?.upstream, "up1");
  assert.equal(row?.inputTokens, 3);
  assert.equal(row?.outputTokens, 2);

  // The bounds themselves: a connection never finishing its headers, and an idle keep-alive one.
  const [half, idle] = await Promise.all([
    heldUntilClosed(gw.port, HALF_HEADERS),
    heldUntilClosed(
      gw.port,
      new TextEncoder().encode("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
    ),
  ]);
  assert.equal(half.text, "", "no answer to headers that never end");
  assert.ok(half.ms >= 1000, `closed after the 1 s headers bound, not ${half.ms} ms`);
  assert.match(idle.text, /^HTTP\/1\.1 200 /);
  assert.ok(idle.ms >= 1000, `closed after the 1 s keep-alive bound, not ${idle.ms} ms`);
  assert.equal(gw.exited, null);
  assert.ok(!gw.logged("gateway.keep_alive_bound_off"), "the request-end probe works here");
  assert.equal(await gw.stop(), 0, "SIGTERM still ends it cleanly");
});

Deno.test("requestEnded: false while Deno serves a request, true once its response is sent", async () => {
  // The Deno behaviour the keep-alive bound relies on (client_connections.ts): if an upgrade
  // changes it, this fails, and the gateway would log gateway.keep_alive_bound_off.
  const seen: boolean[] = [];
  const served: Array<{ info: Deno.ServeHandlerInfo; completed: Promise<void> }> = [];
  await using server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (_, info) => {
    served.push({ info, completed: info.completed });
    seen.push(requestEnded(info));
    const body = new ReadableStream({
      pull(controller) {
        seen.push(requestEnded(info)); // mid-stream
        controller.enqueue(new TextEncoder().encode("x"));
        controller.close();
      },
    });
    return new Response(body);
  });
  const res = await fetch(`http://127.0.0.1:${server.addr.port}/`);
  assert.equal(await res.text(), "x");
  await served[0]!.completed;
  assert.deepEqual(seen, [false, false]);
  assert.equal(requestEnded(served[0]!.info), true);
});

Deno.test("over the connection cap: 503 in the caller's format while all are busy; waiting ones give way", async () => {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  await using up = startFakeUpstream({
    fallback: () => chatStreamHeld({ text: ["a", "b"], usage: { input: 1, output: 1 } }, released),
  });
  await using gw = await spawnLimited({
    upstream: up.url,
    env: { PULSEGATE_MAX_CONNECTIONS: "3" },
  });
  await using _ = { [Symbol.asyncDispose]: () => Promise.resolve(release()) };

  const streams = await Promise.all(["s1", "s2", "s3"].map(async (id) => {
    const res = await postJson(`${gw.url}/v1/chat/completions`, ASK, { "x-request-id": id });
    assert.equal(res.status, 200);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    while (!text.includes('"content":"a"')) text += (await reader.read()).value ?? "";
    return { reader, text };
  }));

  // Three connections, each with a request in flight: nothing may give way to a fourth.
  const refused = await heldUntilClosed(
    gw.port,
    new TextEncoder().encode(
      "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nanthropic-version: 2023-06-01\r\n" +
        "content-type: application/json\r\ncontent-length: 2\r\n\r\n{}",
    ),
  );
  const answer = parseAnswer(refused.text);
  assert.equal(answer.status, 503);
  assert.equal(answer.headers.get("retry-after"), "1");
  assert.equal(answer.headers.get("connection"), "close");
  assert.equal(answer.headers.get("x-pulsegate-error-code"), "gw.gateway.too_many_connections");
  const body = JSON.parse(answer.body);
  assert.equal(body.type, "error", "Anthropic's error shape, for a /v1/messages caller");
  assert.match(body.error.message, /too many open connections/);
  await gw.until("gateway.connection_cap_reached");

  // Taken before the streams end: the gateway's keep-alive wait starts when each one ends.
  const since = performance.now();
  release();
  for (const { reader } of streams) {
    let text = "";
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      text += chunk.value;
    }
    assert.match(text, /data: \[DONE\]/);
  }
  for (const id of ["s1", "s2", "s3"]) {
    const row = await gw.row(id);
    assert.equal(row?.state, "closed");
    assert.equal(row?.outcome, "success");
  }

  // The three are now idle keep-alive connections: once one has waited 1 s it gives way to a
  // newcomer (a 503 before that is the same answer as above).
  let served: ReturnType<typeof parseAnswer> | null = null;
  await eventually(async () => {
    const got = parseAnswer((await heldUntilClosed(gw.port, closeAfterHealthz())).text);
    if (got.status === 200) served = got;
    else assert.equal(got.status, 503);
    return served !== null;
  }, { what: "a newcomer served in place of an idle connection" });
  assert.ok(performance.now() - since >= 1000, "no idle connection is evicted before 1 s");
  assert.equal(gw.exited, null);
});

Deno.test("where plain Deno.serve runs, an accept error drains the requests in flight and exits 1", async () => {
  // DENO_SERVE_ADDRESS hands the socket to Deno.serve (as on Deno Deploy): no connection limits,
  // and Deno.serve's accept loop ends on the first error. The process must not crash with it.
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  await using up = startFakeUpstream({
    fallback: () =>
      chatStreamHeld({ text: ["hel", "lo"], usage: { input: 3, output: 2 } }, released),
  });
  await using gw = await spawnLimited({
    upstream: up.url,
    nofile: 160,
    env: { DENO_SERVE_ADDRESS: `tcp:127.0.0.1:${freePort()}` },
  });
  await using _ = { [Symbol.asyncDispose]: () => Promise.resolve(release()) };
  assert.ok(gw.logged("gateway.connection_limits_off"));
  const live = await postJson(`${gw.url}/v1/chat/completions`, ASK, { "x-request-id": "drained" });
  const stream = live.body!.pipeThrough(new TextDecoderStream()).getReader();
  let received = "";
  while (!received.includes("hel")) received += (await stream.read()).value ?? "";

  await using _flood = await openFlood(gw.port, 200);
  await gw.until("gateway.accept_stopped");
  release();
  for (let chunk = await stream.read(); !chunk.done; chunk = await stream.read()) {
    received += chunk.value;
  }
  assert.match(received, /data: \[DONE\]/);
  assert.equal(await gw.exit, 1, "exits 1 on its own, for the supervisor to restart it");
  const row = await gw.row("drained");
  assert.equal(row?.state, "closed");
  assert.equal(row?.status, 200);
  assert.equal(row?.outputTokens, 2);
});

Deno.test("connection settings: documented defaults, and a clear error for a bad value", () => {
  assert.deepEqual(readSettings(() => undefined).connections, {
    max: 4096,
    headersTimeoutMs: 10_000,
    keepAliveTimeoutMs: 60_000,
  });
  assert.deepEqual(CONNECTION_DEFAULTS, readSettings(() => undefined).connections);
  const set = (name: string, value: string) => (n: string) => n === name ? value : undefined;
  assert.equal(readSettings(set("PULSEGATE_MAX_CONNECTIONS", "3")).connections.max, 3);
  for (const bad of ["0", "-1", "1.5", "many", "1e400"]) {
    assert.throws(
      () => readSettings(set("PULSEGATE_HEADERS_TIMEOUT_MS", bad)),
      new RegExp(`PULSEGATE_HEADERS_TIMEOUT_MS must be a whole number of at least 1, got "${bad}"`),
    );
  }
});

function closeAfterHealthz(): Uint8Array {
  return new TextEncoder().encode(
    "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nconnection: close\r\n\r\n",
  );
}

interface LimitedGateway extends AsyncDisposable {
  url: string;
  port: number;
  pid: number;
  /** Exit code once the process has ended, null while it runs. */
  exited: number | null;
  /** Its exit code, when it ends on its own. */
  exit: Promise<number>;
  until(event: string): Promise<void>;
  logged(event: string): boolean;
  row(id: string): Promise<Awaited<ReturnType<typeof getRequest>>>;
  stop(): Promise<number>;
}

/**
 * main.ts as `deno task start` runs it, under `ulimit -n` (soft and hard: Deno raises its soft
 * limit to the hard one at start). Its stderr is kept, to wait for log events.
 */
async function spawnLimited(
  opts: { upstream: string; nofile?: number; env?: Record<string, string> },
): Promise<LimitedGateway> {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-flood-" });
  await Deno.writeTextFile(`${dir}/config.json`, JSON.stringify(chatRoute([opts.upstream])));
  const deno = [Deno.execPath(), "run", ...narrowPermissions(dir), "main.ts"];
  const child = new Deno.Command("sh", {
    args: opts.nofile ? ["-c", 'ulimit -n "$0" && exec "$@"', String(opts.nofile), ...deno] : [
      "-c",
      'exec "$@"',
      "sh",
      ...deno,
    ],
    cwd: ROOT,
    env: {
      PULSEGATE_PORT: "0",
      PULSEGATE_DB_URL: `file:${dir}/pulsegate.db`,
      PULSEGATE_CONFIG: `${dir}/config.json`,
      ...opts.env,
    },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let log = "";
  let exited: number | null = null;
  const ended = child.status.then((status) => (exited = status.code));
  const draining = (async () => {
    for await (const text of child.stderr.pipeThrough(new TextDecoderStream())) log += text;
  })();
  const running = () => {
    if (exited !== null) throw new Error(`the gateway exited with ${exited}:\n${log}`);
    return true;
  };
  await eventually(() => running() && /pulsegate listening on/.test(log), {
    what: "the gateway listening",
  });
  const url = log.match(/pulsegate listening on (http:\/\/\S+)/)![1]!;
  const db = await openDatabase(`file:${dir}/pulsegate.db`, { busyTimeoutMs: 5_000 });
  const stop = async () => {
    if (exited === null) child.kill("SIGTERM");
    const code = await ended;
    await draining;
    return code;
  };
  return {
    url,
    port: Number(new URL(url).port),
    pid: child.pid,
    get exited() {
      return exited;
    },
    exit: ended,
    until: (event) =>
      eventually(() => running() && log.includes(`"event":"${event}"`), { what: event }),
    logged: (event) => log.includes(`"event":"${event}"`),
    async row(id) {
      await eventually(async () => ((await getRequest(db, id))?.state ?? "open") !== "open", {
        what: `request ${id} recorded as ended`,
      });
      return await getRequest(db, id);
    },
    stop,
    async [Symbol.asyncDispose]() {
      await stop();
      db.close();
    },
  };
}

/** Connections that send half a request and hold it; each is watched for the gateway closing it. */
async function openFlood(port: number, size: number) {
  const conns: Deno.Conn[] = [];
  let closed = 0;
  for (let i = 0; i < size; i++) {
    // A listener gone with the flood (a gateway that died of it, or plain Deno.serve's ended
    // accept loop) refuses or resets the rest; the test then fails, or not, on what the gateway
    // did, not here.
    const conn = await Deno.connect({ hostname: "127.0.0.1", port }).catch(() => null);
    if (!conn) break;
    conns.push(conn);
    if (!(await conn.write(HALF_HEADERS).then(() => true, () => false))) {
      closed++;
      break;
    }
    (async () => {
      const buffer = new Uint8Array(1024);
      try {
        while ((await conn.read(buffer)) !== null) { /* the gateway sends nothing */ }
      } catch { /* reset: closed as well */ }
      closed++;
    })();
  }
  return {
    size: conns.length,
    get closed() {
      return closed;
    },
    [Symbol.asyncDispose]() {
      for (const conn of conns) {
        try {
          conn.close();
        } catch { /* closed */ }
      }
      return Promise.resolve();
    },
  };
}

/**
 * Sends `bytes` on a new connection and reads until the gateway closes it; fails if it is still
 * open after 10 s (longer than any bound the tests set).
 */
async function heldUntilClosed(
  port: number,
  bytes: Uint8Array,
): Promise<{ text: string; ms: number }> {
  // Before the connect: the gateway's bounds start at its accept, which comes after.
  const start = performance.now();
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  let stillOpen = false;
  const deadline = setTimeout(() => {
    stillOpen = true;
    conn.close();
  }, 10_000);
  try {
    await conn.write(bytes);
    const text = await new Response(conn.readable).text().catch((err) => {
      if (stillOpen) throw new Error("the gateway kept the connection open for 10 s");
      throw err;
    });
    return { text, ms: performance.now() - start };
  } finally {
    clearTimeout(deadline);
    try {
      conn.close();
    } catch { /* closed by reading to the end */ }
  }
}

function parseAnswer(raw: string): { status: number; headers: Headers; body: string } {
  const split = raw.indexOf("\r\n\r\n");
  const [statusLine = "", ...fields] = raw.slice(0, split).split("\r\n");
  const headers = new Headers();
  for (const field of fields) {
    const colon = field.indexOf(":");
    headers.append(field.slice(0, colon).trim(), field.slice(colon + 1).trim());
  }
  return { status: Number(statusLine.split(" ")[1]), headers, body: raw.slice(split + 4) };
}

async function healthy(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2_000) });
    await res.body?.cancel();
    return res.status === 200;
  } catch {
    return false;
  }
}

async function fdCount(pid: number): Promise<number> {
  let n = 0;
  for await (const _ of Deno.readDir(`/proc/${pid}/fd`)) n++;
  return n;
}
