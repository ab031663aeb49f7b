/**
 * `deno task test` runs the suite as three processes side by side (tests/run_suite.ts), each
 * importing a share of the test files under tests/ (tests/suite_a.ts, suite_b.ts, suite_c.ts), so
 * the gateway's modules, libSQL and the SDKs load once per shard instead of once per file (over a
 * second each), and one shard's waits overlap another's work. The files whose tests are mostly a
 * child process of their own (`CHILD_PROCESS_FILES`) start the last shard; the rest go by time
 * (tests/test_files.ts). `deno test -A tests/virtual/hedge_test.ts` still runs one file alone.
 * docs/architecture.md "Tests".
 */
import { CHILD_PROCESS_FILES, shardFiles, testFiles } from "./test_files.ts";

/** The suite's shards: tests/run_suite.ts runs one `deno test` per shard. */
export const SHARDS = 3;

/** The module that runs shard `index`, from the repository's root. */
export function shardModule(index: number): string {
  return `tests/suite_${String.fromCharCode(97 + index)}.ts`;
}

/**
 * The suite's files by shard: the child-process files in the last shard, then every other file
 * to the shard with the least time so far, the last one included.
 */
export function suiteShards(
  files: readonly string[],
  opts: { seconds?: Readonly<Record<string, number>>; own?: readonly string[] } = {},
): string[][] {
  const placed = [...Array.from({ length: SHARDS - 1 }, () => []), opts.own ?? CHILD_PROCESS_FILES];
  return shardFiles(files, { count: SHARDS, seconds: opts.seconds, placed });
}

/** Imports shard `index` of the suite's files. */
export async function importShard(index: number): Promise<void> {
  const shard = suiteShards(await testFiles())[index] ?? [];
  for (const file of shard) await import(new URL(file, import.meta.url).href);
}
