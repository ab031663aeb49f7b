/**
 * `deno task test` runs the suite as two modules side by side (`--parallel`): tests/suite_a.ts
 * and tests/suite_b.ts each import half of the test files under tests/ (by time:
 * tests/test_files.ts), so the gateway's modules, libSQL and the SDKs load once per half instead of
 * once per file (over a second each), and one half's timer waits overlap the other's work.
 * `deno test -A tests/hedge_test.ts` still runs one file alone. docs/architecture.md "Tests".
 */
import { shardFiles, testFiles } from "./test_files.ts";

/** The suite's halves: `deno task test` names one module per shard. */
export const SHARDS = 2;

/** Imports shard `index` of the suite's files. */
export async function importShard(index: number): Promise<void> {
  const shard = shardFiles(await testFiles(), { count: SHARDS })[index] ?? [];
  for (const file of shard) await import(new URL(file, import.meta.url).href);
}
