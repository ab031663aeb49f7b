/**
 * What history costs on disk per request: fills a fresh file with `requests` requests shaped like
 * the gateway's (bench/history_fill.ts), runs VACUUM, and answers page_count x page_size per
 * request, and per table and index from `dbstat`. `deno run -A bench/history_size.ts [N]`.
 */
import { openDatabase } from "../db/client.ts";
import { migrate } from "../db/migrate.ts";
import { num, text } from "../db/row_values.ts";
import type { Db } from "../db/client.ts";
import { fillHistory } from "./history_fill.ts";

export interface SizeReport {
  requests: number;
  bytes: number;
  bytesPerRequest: number;
  /** Bytes per request of each table and index, largest first. */
  byName: { name: string; bytesPerRequest: number }[];
}

/** Bytes per request of a database holding `requests` requests, after VACUUM. */
export async function measureSize(db: Db, requests: number): Promise<SizeReport> {
  await db.client.execute("VACUUM");
  const [pages, size] = await db.client.batch(["PRAGMA page_count", "PRAGMA page_size"], "read");
  const bytes = num(pages!.rows[0]!, "page_count") * num(size!.rows[0]!, "page_size");
  const per = await db.client.execute(
    "SELECT name, sum(pgsize) AS bytes FROM dbstat GROUP BY name ORDER BY bytes DESC",
  );
  return {
    requests,
    bytes,
    bytesPerRequest: bytes / requests,
    byName: per.rows.map((row) => ({
      name: text(row, "name"),
      bytesPerRequest: num(row, "bytes") / requests,
    })).filter((entry) => entry.bytesPerRequest >= 1),
  };
}

if (import.meta.main) {
  const requests = Number(Deno.args[0] ?? 100_000);
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-size-" });
  const db = await openDatabase(`file:${dir}/history.db`);
  await migrate(db);
  const ms = await fillHistory(db, { requests, now: Date.now(), days: 30 });
  const report = await measureSize(db, requests);
  db.close();
  await Deno.remove(dir, { recursive: true });
  console.log(`filled ${requests} requests in ${(ms / 1000).toFixed(1)} s`);
  console.log(`${report.bytesPerRequest.toFixed(0)} bytes per request (${report.bytes} bytes)`);
  for (const { name, bytesPerRequest } of report.byName) {
    console.log(`  ${name.padEnd(34)} ${bytesPerRequest.toFixed(1)}`);
  }
}
