const TESTS_DIR = new URL("./", import.meta.url);

/** Every `*_test.ts(x)` under `dir`, relative to it and sorted: what the suite imports. */
export async function testFiles(dir: URL = TESTS_DIR): Promise<string[]> {
  const found: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (entry.isDirectory) {
      const inner = await testFiles(new URL(`${entry.name}/`, dir));
      found.push(...inner.map((name) => `${entry.name}/${name}`));
    } else if (/_test\.tsx?$/.test(entry.name)) {
      found.push(entry.name);
    }
  }
  return found.sort();
}

/**
 * Seconds a file's tests took, where over 1.5 (fresh clone, idle 2-core machine, one process,
 * 2026-12-02); any other file counts as 1. Only the split between shards reads it: a stale figure
 * makes the shards less even, never a test wrong.
 */
export const FILE_SECONDS: Readonly<Record<string, number>> = {
  "bench_quick_test.ts": 51,
  "fault_matrix_test.ts": 27,
  "admin_browser_test.ts": 26,
  "agents/opencode_test.ts": 17,
  "type_check_test.ts": 15,
  "agents/gemini_cli_test.ts": 9,
  "hostile_input_test.ts": 8,
  "idle_timer_test.ts": 8,
  "failover_test.ts": 7,
  "connection_flood_test.ts": 7,
  "first_content_timeout_test.ts": 7,
  "guardrails_test.ts": 6,
  "multi_process_abort_test.ts": 6,
  "admin_sessions_browser_test.ts": 6,
  "resume_test.ts": 5,
  "hostile_body_test.ts": 5,
  "upstream_errors_test.ts": 3,
  "agents/claude_code_test.ts": 3,
  "agents/codex_test.ts": 3,
  "upstream_cancel_test.ts": 3,
  "multi_process_probe_test.ts": 3,
  "gemini_stream_errors_test.ts": 3,
  "retries_and_cooldown_test.ts": 2,
};

/**
 * `files` in `count` shards of about equal time: the slowest file first, each to the shard with
 * the least time so far (ties to the first). Each shard keeps the files' sorted order.
 */
export function shardFiles(
  files: readonly string[],
  opts: { count: number; seconds?: Readonly<Record<string, number>> },
): string[][] {
  const seconds = opts.seconds ?? FILE_SECONDS;
  const cost = (file: string) => seconds[file] ?? 1;
  const shards = Array.from({ length: opts.count }, () => ({ files: [] as string[], total: 0 }));
  const slowestFirst = [...files].sort((a, b) => cost(b) - cost(a) || (a < b ? -1 : 1));
  for (const file of slowestFirst) {
    const lightest = shards.reduce((min, s) => s.total < min.total ? s : min);
    lightest.files.push(file);
    lightest.total += cost(file);
  }
  return shards.map((s) => s.files.sort());
}
