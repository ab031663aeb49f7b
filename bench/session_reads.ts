/**
 * The admin Sessions panel's read (docs/scaling.md "Session summaries"), before and after the
 * summaries: fills a local file with `requests` generated requests over `days` (sessions of 20
 * requests, tests/fixtures/large_history.ts) under the migrations before the summaries, times the
 * summaries' migration (its backfill), then the panel's default read (a day, 50 sessions) by the
 * former query over the rows and by the summaries, each the runs after a first.
 *
 *   deno run -A bench/session_reads.ts [requests=1000000] [days=1] [runs=3]
 */
import { openDatabase } from "../db/client.ts";
import { migrate } from "../db/migrate.ts";
import { MIGRATIONS } from "../db/migrations.ts";
import { recentSessions } from "../db/session_queries.ts";
import { fillHistory } from "../tests/fixtures/large_history.ts";
import { SESSIONS_FROM_ROWS } from "../tests/fixtures/sessions_from_rows.ts";

const [requests = 1_000_000, days = 1, runs = 3] = Deno.args.map(Number);
const DAY_MS = 86_400_000;

async function timed(fn: () => Promise<unknown>): Promise<number[]> {
  await fn();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await fn();
    times.push(Math.round(performance.now() - t));
  }
  return times;
}

const dir = await Deno.makeTempDir({ prefix: "pulsegate_session_reads_" });
const db = await openDatabase(`file:${dir}/history.db`);
try {
  const at = MIGRATIONS.findIndex((m) => m.name === "session_summaries");
  await migrate(db, { migrations: MIGRATIONS.slice(0, at) });
  const now = Date.now();
  let t = performance.now();
  await fillHistory(db, { requests, now, spanMs: days * DAY_MS });
  console.log(
    `filled ${requests} requests over ${days} day(s) in ${Math.round(performance.now() - t)} ms`,
  );
  t = performance.now();
  await migrate(db);
  console.log(`summaries' migration (backfill): ${Math.round(performance.now() - t)} ms`);
  const since = now - DAY_MS;
  const rows = await timed(() => db.client.execute({ sql: SESSIONS_FROM_ROWS, args: [since, 50] }));
  const summaries = await timed(() => recentSessions(db, { since, limit: 50 }));
  console.log(
    `a day's sessions, 50: rows ${rows.join(", ")} ms; summaries ${summaries.join(", ")} ms`,
  );
} finally {
  db.close();
  await Deno.remove(dir, { recursive: true });
}
