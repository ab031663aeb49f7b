/**
 * `deno task test` runs the suite as two processes side by side (tests/run_suite.ts):
 * tests/suite_a.ts and tests/suite_b.ts each import half of the test files under tests/ (by time:
 * tests/test_files.ts), so the gateway's modules, libSQL and the SDKs load once per half instead of
 * once per file (over a second each), and one half's timer waits overlap the other's work.
 * `deno test -A tests/hedge_test.ts` still runs one file alone. docs/architecture.md "Tests".
 */
import { shardFiles, testFiles } from "./test_files.ts";

/** The suite's halves: tests/run_suite.ts runs one `deno test` per shard. */
export const SHARDS = 2;

/** The module that runs shard `index`, from the repository's root. */
export function shardModule(index: number): string {
  return `tests/suite_${String.fromCharCode(97 + index)}.ts`;
}

/** Imports shard `index` of the suite's files. */
export async function importShard(index: number): Promise<void> {
  const shard = shardFiles(await testFiles(), { count: SHARDS })[index] ?? [];
  for (const file of shard) await import(new URL(file, import.meta.url).href);
}
