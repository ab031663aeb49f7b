import assert from "node:assert/strict";
import { openDatabase } from "../db/client.ts";
import { chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";
import { eventually, postJson } from "./harness.ts";
import { assertResponsive, type HealthPolls, pollHealth } from "./health_poll.ts";
import { type RawBodyAnswer, RawBodyClient } from "./raw_body.ts";
import { spawnGateway } from "./spawn_gateway.ts";

/**
 * Request bodies that are slow, short, endless or declared huge, thrown at a gateway process
 * (docs/security.md "Request bodies and per-key concurrency"): memory follows the bytes that
 * arrived, never a declared length; each gets its 4xx in the caller's format (or, when the
 * caller left, a 499 row); nothing reaches the upstream; every place in progress is given back;
 * `/healthz` stays quick throughout. At time scale 0.1 a body's 10 s grace lasts 1 s.
 */

const FLOOD = "sk-flood";
const CAPPED = "sk-capped";
const PATH = "/v1/chat/completions";
const ASK = { model: "smart", messages: [{ role: "user", content: "hi" }] };
const MiB = 1024 * 1024;

const headersFor = (key: string, more: Record<string, string>) => ({
  authorization: `Bearer ${key}`,
  "content-type": "application/json",
  ...more,
});

async function startGateway() {
  const up = startFakeUpstream({
    fallback: () => chatWhole({ text: ["ok"], usage: { input: 1, output: 1 } }),
  });
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-hostile-body-" });
  const config = `${dir}/config.json`;
  await Deno.writeTextFile(
    config,
    JSON.stringify({
      upstreams: [{ id: "up1", kind: "openai-chat", base_url: up.url }],
      routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "m" }] }],
      keys: [
        { id: "flood", key_env: "PULSEGATE_KEY_FLOOD" },
        { id: "capped", key_env: "PULSEGATE_KEY_CAPPED", max_in_flight: 2 },
      ],
    }),
  );
  const gw = await spawnGateway(dir, {
    env: {
      PULSEGATE_CONFIG: config,
      PULSEGATE_KEY_FLOOD: FLOOD,
      PULSEGATE_KEY_CAPPED: CAPPED,
      PULSEGATE_TIME_SCALE: "0.1",
      PULSEGATE_METRICS_OPEN: "1",
    },
  });
  const db = await openDatabase(`file:${dir}/pulsegate.db`, { busyTimeoutMs: 5_000 });
  return {
    gw,
    up,
    /** Closed rows by request id: status and code. */
    async rows(ids: string[]): Promise<Map<string, { status: number; code: string | null }>> {
      let rows = new Map<string, { status: number; code: string | null }>();
      await eventually(async () => {
        const result = await db.client.execute(
          "SELECT id, status, error_code FROM requests WHERE state = 'closed'",
        );
        rows = new Map(result.rows.map((r) => [
          String(r.id),
          { status: Number(r.status), code: r.error_code === null ? null : String(r.error_code) },
        ]));
        return ids.every((id) => rows.has(id));
      }, { what: "every request's row closed" });
      return rows;
    },
    async [Symbol.asyncDispose]() {
      db.close();
      gw.child.kill("SIGTERM");
      await gw.child.status;
      await up.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

async function rssMiB(pid: number): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  return Number(status.match(/VmRSS:\s+(\d+) kB/)?.[1]) / 1024;
}

/** One series' value in the gateway's /metrics (0 when absent). */
async function metric(url: string, series: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

async function nothingInProgress(url: string): Promise<void> {
  await eventually(async () =>
    await metric(url, "pulsegate_inflight_requests") === 0 &&
    await metric(url, 'pulsegate_key_in_flight_requests{key="flood"}') === 0 &&
    await metric(url, 'pulsegate_key_in_flight_requests{key="capped"}') === 0, {
    what: "no request and no key place in progress",
  });
}

Deno.test("60 bodies declaring 32 MiB and sending a byte: memory stays flat, each gets its 408 and row, and its connection is closed", async () => {
  await using t = await startGateway();
  const { gw } = t;
  const pid = gw.child.pid;
  const warm = await postJson(`${gw.url}${PATH}`, ASK, { authorization: `Bearer ${FLOOD}` });
  assert.equal(warm.status, 200);
  await warm.body?.cancel();
  const connectionsBefore = await metric(gw.url, "pulsegate_client_connections");
  const before = await rssMiB(pid);
  const poller = await pollHealth(gw.url);
  const ids = Array.from({ length: 60 }, (_, i) => `declared-${i}`);
  const clients = await Promise.all(ids.map((id) =>
    RawBodyClient.open(gw.url, {
      path: PATH,
      headers: headersFor(FLOOD, { "content-length": String(32 * MiB), "x-request-id": id }),
    })
  ));
  let answers: PromiseSettledResult<RawBodyAnswer>[] = [];
  let health: HealthPolls;
  let peak = before;
  try {
    await Promise.all(clients.map((c) => c.write("{")));
    let settled = false;
    const all = Promise.allSettled(clients.map((c) => c.answer({ ms: 15_000 })));
    all.finally(() => (settled = true));
    // Sampled until every body has its answer: the whole time the bodies are pending.
    while (!settled) {
      peak = Math.max(peak, await rssMiB(pid));
      await new Promise((r) => setTimeout(r, 20));
    }
    answers = await all;
    // The rest of each body never comes: the gateway closes the connection after its answer
    // (docs/deploy.md "Answers before the body"), where it used to wait for the 32 MiB.
    const ends = await Promise.all(
      clients.map((c) => c.ended({ ms: 15_000 }).catch((err) => String(err))),
    );
    health = await poller.stop();
    assert.deepEqual(ends, ids.map(() => "eof"), "every connection closed after its 408");
    // Counted down by the gateway's own close: every client still holds its socket (and the
    // poller, counted since, has stopped).
    await eventually(
      async () => await metric(gw.url, "pulsegate_client_connections") === connectionsBefore,
      { what: `the gateway's open connections back to ${connectionsBefore}` },
    );
  } finally {
    for (const c of clients) c.close();
  }
  // Reserving each declared length took the process from ~240 MB to over 2 GB.
  assert.ok(
    peak - before < 128,
    `RSS grew ${(peak - before).toFixed(0)} MiB (${before} -> ${peak})`,
  );
  for (const [i, a] of answers.entries()) {
    assert.equal(a.status, "fulfilled", `${ids[i]}: ${a.status === "rejected" ? a.reason : ""}`);
    const answer = (a as PromiseFulfilledResult<RawBodyAnswer>).value;
    assert.equal(answer.status, 408, answer.text);
    assert.equal(answer.headers.get("x-pulsegate-error-code"), "gw.client.body_timeout");
    assert.equal(JSON.parse(answer.text).error.type, "timeout_error");
  }
  assertResponsive(health, "60 declared bodies");
  const rows = await t.rows(ids);
  for (const id of ids) {
    assert.deepEqual(rows.get(id), { status: 408, code: "gw.client.body_timeout" }, id);
  }
  await nothingInProgress(gw.url);
  assert.equal(t.up.calls.length, 1, "only the warm-up request reached the upstream");
});

/** A hostile body: what its client does after the headers, and what the gateway must record. */
interface BodyCase {
  id: string;
  key?: string;
  headers: Record<string, string>;
  /** The gateway's answer, or null when the client left before it. */
  act(c: RawBodyClient): Promise<RawBodyAnswer | null>;
  status: number;
  code: string;
}

const chunk = (bytes: number) => `${bytes.toString(16)}\r\n${" ".repeat(bytes)}\r\n`;

const CASES: BodyCase[] = [
  {
    id: "trickle",
    headers: { "content-length": "100000" },
    act: (c) => (c.trickle(" ", { everyMs: 50 }), c.answer()),
    status: 408,
    code: "gw.client.body_timeout",
  },
  {
    // Small enough to be read in one call (gateway/accept/body_bytes.ts): the same deadline.
    id: "trickle-small",
    headers: { "content-length": "1000" },
    act: (c) => (c.trickle(" ", { everyMs: 50 }), c.answer()),
    status: 408,
    code: "gw.client.body_timeout",
  },
  {
    id: "chunked-endless-trickle",
    headers: { "transfer-encoding": "chunked" },
    act: (c) => (c.trickle(chunk(1), { everyMs: 50 }), c.answer()),
    status: 408,
    code: "gw.client.body_timeout",
  },
  {
    id: "chunked-past-the-limit",
    headers: { "transfer-encoding": "chunked" },
    act: (c) => (c.trickle(chunk(MiB), { everyMs: 1 }), c.answer()),
    status: 413,
    code: "gw.client.body_too_large",
  },
  {
    id: "declared-past-the-limit",
    headers: { "content-length": String(32 * MiB + 1) },
    act: (c) => c.answer(),
    status: 413,
    code: "gw.client.body_too_large",
  },
  {
    id: "declared-longer-then-gone",
    headers: { "content-length": "1000" },
    act: async (c) => {
      await c.write('{"model": "smart"');
      c.close();
      return null;
    },
    status: 499,
    code: "gw.client.disconnected",
  },
  {
    id: "chunked-then-gone",
    headers: { "transfer-encoding": "chunked" },
    act: async (c) => {
      await c.write(`5\r\n{"mod`);
      c.close();
      return null;
    },
    status: 499,
    code: "gw.client.disconnected",
  },
  {
    id: "expect-continue-then-gone",
    headers: { "content-length": "100", expect: "100-continue" },
    act: async (c) => {
      await c.received("100 Continue");
      c.close();
      return null;
    },
    status: 499,
    code: "gw.client.disconnected",
  },
];

Deno.test("hostile bodies: each gets its 4xx or 499 row, no upstream call, every place given back", async () => {
  await using t = await startGateway();
  const { gw } = t;
  const poller = await pollHealth(gw.url);
  const open = (c: Pick<BodyCase, "id" | "key" | "headers">) =>
    RawBodyClient.open(gw.url, {
      path: PATH,
      headers: headersFor(c.key ?? FLOOD, { ...c.headers, "x-request-id": c.id }),
    });
  const problems: string[] = [];
  const clients: RawBodyClient[] = [];
  try {
    const run = async (c: BodyCase) => {
      const client = await open(c);
      clients.push(client);
      const answer = await c.act(client).catch((err) => {
        problems.push(`${c.id}: ${err}`);
        return null;
      });
      if (!answer) return;
      const code = answer.headers.get("x-pulsegate-error-code");
      if (answer.status !== c.status || code !== c.code) {
        problems.push(`${c.id}: wanted ${c.status} ${c.code}, got ${answer.status} ${code}`);
      }
      if (answer.headers.get("x-request-id") !== c.id) problems.push(`${c.id}: wrong id`);
      JSON.parse(answer.text); // in the client's format: JSON, never an empty body
    };
    await Promise.all(CASES.map(run));
    // A key at its max_in_flight: two slow bodies hold both places, a third is refused. They
    // send twice the minimum rate (16 KiB/s, ten times that at this time scale) until the third
    // is answered, so the deadline cannot free a place first; then they stop
    // and get their 408. They start once the cases above are done: a case sending a MiB each
    // millisecond once starved their timers past the deadline, and the third got 200.
    const release = new AbortController();
    const holding = ["capped-1", "capped-2"].map((id) => ({
      id,
      key: CAPPED,
      headers: { "content-length": String(30_000_000) },
      act: (c: RawBodyClient) => (
        c.trickle(" ".repeat(32 * 1024), { everyMs: 100, stop: release.signal }), c.answer()
      ),
      status: 408,
      code: "gw.client.body_timeout",
    }));
    const running = holding.map(run);
    await eventually(
      async () => await metric(gw.url, 'pulsegate_key_in_flight_requests{key="capped"}') === 2,
      { what: "the capped key holding both its places" },
    );
    const body = JSON.stringify(ASK);
    const third = await open({
      id: "capped-3",
      key: CAPPED,
      headers: { "content-length": String(body.length) },
    });
    clients.push(third);
    await third.write(body);
    const refused = await third.answer();
    assert.equal(refused.status, 429, refused.text);
    assert.equal(refused.headers.get("x-pulsegate-error-code"), "gw.key.max_in_flight");
    assert.equal(refused.headers.get("retry-after"), "1");
    assert.equal(JSON.parse(refused.text).error.code, "gw.key.max_in_flight");
    release.abort();
    await Promise.all(running);
  } finally {
    for (const c of clients) c.close();
  }
  const health = await poller.stop();
  assert.deepEqual(problems, []);
  const expected = new Map<string, { status: number; code: string }>([
    ...CASES.map((c) => [c.id, { status: c.status, code: c.code }] as const),
    ["capped-1", { status: 408, code: "gw.client.body_timeout" }],
    ["capped-2", { status: 408, code: "gw.client.body_timeout" }],
    ["capped-3", { status: 429, code: "gw.key.max_in_flight" }],
  ]);
  const rows = await t.rows([...expected.keys()]);
  for (const [id, want] of expected) assert.deepEqual(rows.get(id), want, id);
  await nothingInProgress(gw.url);
  assert.equal(t.up.calls.length, 0, "no hostile body reached the upstream");
  assertResponsive(health, "the hostile bodies");
});
