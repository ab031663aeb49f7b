import assert from "node:assert/strict";
import { openDatabase } from "../db/client.ts";
import { migrate } from "../db/migrate.ts";
import { chatRoute, postJson, startTestGateway } from "./harness.ts";
import { chatStream } from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";
import { fillHistory } from "./fixtures/large_history.ts";

// docs/scaling.md "Admin reads": a local file's admin reads run on a reader thread of their own,
// each stopped at its bound, so a report over a large history never holds a proxied answer.

const DAY_MS = 86_400_000;
/** Rows enough that a month's costs take ~0.2 s and the day's trends ~0.5 s on the serving thread. */
const ROWS = 300_000;
/** The fake upstream's pace: one piece of the answer every PIECE_MS. */
const PIECE_MS = 50;
const PIECES = 60;
/**
 * The longest wait between two pieces the caller may see. On the serving thread one round of the
 * page's reads holds it over a second (the day's trends ~0.5 s, a month's costs ~0.2 s each, in a
 * row), so a stream there sees gaps of 1 s and more; off it, the pace and the scheduler's turns.
 */
const MAX_GAP_MS = 600;

let generated: Promise<string> | null = null;

/** One large history per test process, copied for each gateway (filling it takes seconds). */
function largeHistory(now: number): Promise<string> {
  generated ??= (async () => {
    const dir = await Deno.makeTempDir({ prefix: "pulsegate-large-" });
    const db = await openDatabase(`file:${dir}/pulsegate.db`);
    try {
      await migrate(db);
      // Two days of rows: the day's trends read half, a month's costs all of them.
      await fillHistory(db, { requests: ROWS, now, spanMs: 2 * DAY_MS });
      await db.client.execute("PRAGMA wal_checkpoint(TRUNCATE)");
    } finally {
      db.close();
    }
    return `${dir}/pulsegate.db`;
  })();
  return generated;
}

async function gatewayOnLargeHistory(upstream: string, env: Record<string, string> = {}) {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-test-" });
  await Deno.copyFile(await largeHistory(Date.now()), `${dir}/pulsegate.db`);
  // Real time (scale 1), so a stalled thread is never mistaken for an idle upstream; the
  // history worker and the admin reader on their own threads, as a served gateway runs them.
  return await startTestGateway(chatRoute([upstream]), {
    dir,
    scale: 1,
    historyWorker: true,
    env,
  });
}

/**
 * The page's heaviest reads, over and over, until `stop` is aborted; answers counted by status,
 * a request that got none as 0 (never a rejection: the test reads the count even when it fails).
 */
async function adminLoad(url: string, stop: AbortSignal): Promise<Map<number, number>> {
  const since = Date.now() - 30 * DAY_MS;
  const paths = [
    ...["route", "key", "upstream"].map((by) => `/admin/api/costs?by=${by}&since=${since}`),
    "/admin/api/trends?window=24h",
    "/admin/api/requests?limit=200",
    "/admin/api/sessions",
  ];
  const statuses = new Map<number, number>();
  while (!stop.aborted) {
    await Promise.all(paths.map(async (path) => {
      const status = await fetch(url + path).then(async (res) => {
        await res.body?.cancel();
        return res.status;
      }, () => 0);
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
    }));
  }
  return statuses;
}

/**
 * Streams one answer; returns its text and the wait before each chunk after the first, in ms (two
 * pieces may come in one chunk).
 */
async function pieceGaps(url: string): Promise<{ text: string; gaps: number[] }> {
  const res = await postJson(`${url}/v1/chat/completions`, {
    model: "smart",
    stream: true,
    messages: [{ role: "user", content: "hi" }],
  });
  assert.equal(res.status, 200);
  const gaps: number[] = [];
  const decoder = new TextDecoder();
  let text = "";
  let last: number | null = null;
  for await (const chunk of res.body!) {
    const now = performance.now();
    if (last !== null) gaps.push(now - last);
    last = now;
    text += decoder.decode(chunk, { stream: true });
  }
  return { text, gaps };
}

Deno.test("a proxied stream keeps its pace while the admin page reads a large history", async () => {
  await using upstream = startFakeUpstream();
  const text = Array.from({ length: PIECES }, (_, i) => `piece ${i} `);
  upstream.setHandler(() => chatStream({ text }, { gap: PIECE_MS }));
  await using gw = await gatewayOnLargeHistory(upstream.url);
  // The reader's first answer: its thread and connections are up before the stream starts.
  assert.equal((await fetch(`${gw.url}/admin/api/trends?window=24h`)).status, 200);
  const stop = new AbortController();
  const load = adminLoad(gw.url, stop.signal);
  let streamed: { text: string; gaps: number[] };
  try {
    streamed = await pieceGaps(gw.url);
  } finally {
    // The load's last round ends before the gateway stops, whatever the stream did.
    stop.abort();
    await load;
  }
  const { text: streamedText, gaps } = streamed;
  for (const piece of text) assert.ok(streamedText.includes(piece), `"${piece}" streamed`);
  const worst = Math.max(...gaps);
  assert.ok(worst < MAX_GAP_MS, `the longest wait between pieces was ${worst.toFixed(0)} ms`);
  const statuses = await load;
  assert.deepEqual([...statuses.keys()], [200], "every admin read answered");
  assert.ok((statuses.get(200) ?? 0) >= 6, "the admin reads ran while the stream did");
});

Deno.test("an admin read past its bound is stopped and answered admin.query_too_large", async () => {
  await using upstream = startFakeUpstream();
  // Whatever reads the page makes fast, a history page filtered by a hop outcome no generated
  // request has walks every row of the two days and looks up its hops (~1 s over these rows):
  // far past this bound, which a request's detail (an index lookup) never comes near.
  await using gw = await gatewayOnLargeHistory(upstream.url, {
    PULSEGATE_ADMIN_QUERY_TIMEOUT_MS: "50",
  });
  const res = await fetch(`${gw.url}/admin/api/requests?outcome=resumed&limit=200`);
  assert.equal(res.status, 503);
  const body = await res.json();
  assert.equal(body.error.code, "admin.query_too_large");
  assert.match(body.error.message, /too large/);
  assert.match(body.error.message, /50 ms/);
  assert.match(body.error.message, /a time range \(`since`, `until`\)/);
  // The reader goes on: the next read answers.
  const detail = await fetch(`${gw.url}/admin/api/requests/gen-00000001`);
  assert.equal(detail.status, 200);
  assert.equal((await detail.json()).request.id, "gen-00000001");
});
