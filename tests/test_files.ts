const TESTS_DIR = new URL("./", import.meta.url);

/**
 * The folders whose modules may keep their tests beside them (`foo_test.ts` next to `foo.ts`,
 * docs/architecture.md "Tests"), relative to tests/.
 */
export const MODULE_DIRS = ["../gateway/", "../db/", "../admin/"] as const;

/**
 * Every `*_test.ts(x)` the suite imports, sorted: those under tests/ relative to it, then those
 * beside their modules (`../gateway/...`). `dir` alone lists one folder's, relative to it.
 */
export async function testFiles(dir?: URL): Promise<string[]> {
  if (dir) return await testFilesIn(dir);
  const found = await testFilesIn(TESTS_DIR);
  for (const moduleDir of MODULE_DIRS) {
    const inner = await testFilesIn(new URL(moduleDir, TESTS_DIR));
    found.push(...inner.map((name) => `${moduleDir}${name}`));
  }
  return found.sort();
}

async function testFilesIn(dir: URL): Promise<string[]> {
  const found: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (entry.isDirectory) {
      if (entry.name === "node_modules") continue;
      const inner = await testFilesIn(new URL(`${entry.name}/`, dir));
      found.push(...inner.map((name) => `${entry.name}/${name}`));
    } else if (/_test\.tsx?$/.test(entry.name)) {
      found.push(entry.name);
    }
  }
  return found.sort();
}

/**
 * Seconds a file's tests took where over 1.5 (`deno task test` in a fresh clone on the 2-core
 * machine, 2026-12-02, from the JUnit reports PULSEGATE_JUNIT_DIR asks
 * tests/run_suite.ts for); any other file counts as 1. Only the split between shards reads it: a
 * stale figure makes the shards less even, never a test wrong.
 */
export const FILE_SECONDS: Readonly<Record<string, number>> = {
  "bench_quick_test.ts": 67,
  // In virtual time, all cells of a group side by side (2026-12-07).
  "virtual/fault_matrix_test.ts": 28,
  "admin_browser_test.ts": 38,
  "type_check_test.ts": 37,
  // Each agent's two abort runs added their own (the agents' abort tests, 2026-12-06).
  "agents/opencode_test.ts": 57,
  "hostile_input_test.ts": 25,
  "agents/gemini_cli_test.ts": 28,
  "admin_reads_pace_test.ts": 20,
  "agents/codex_test.ts": 17,
  "multi_process_abort_test.ts": 13,
  "agents/claude_code_test.ts": 15,
  "connection_flood_test.ts": 11,
  "agent_translation_test.ts": 10,
  "admin_sessions_browser_test.ts": 9,
  // Measured alone on the 2-core machine (7 s with its child), not from the suite's reports.
  "admin_fences_browser_test.ts": 7,
  // Two gateway processes and Chromium, measured alone (8 s with its child, 2026-12-07).
  "admin_fleet_browser_test.ts": 8,
  "guardrails_test.ts": 8,
  "hostile_body_test.ts": 8,
  "bounded_names_test.ts": 6,
  "deploy_platform_test.ts": 6,
  "format_matrix_test.ts": 5,
  "admin_assets_test.ts": 5,
  // The vector budget's 429 waits its 2 s (embeddings_limits_test.ts, 2026-12-06).
  "embeddings_limits_test.ts": 5,
  "multi_process_probe_test.ts": 5,
  "admin_api_test.ts": 4,
  // Measured alone on the 2-core machine (2026-12-07), not from the suite's reports.
  "mcp_fault_table_test.ts": 4,
  "mcp_test.ts": 3,
  "start_paths_test.ts": 4,
  "multi_process_config_test.ts": 4,
  "history_outage_test.ts": 4,
  "key_limits_process_test.ts": 4,
  "start_deps_test.ts": 3,
  "refused_flood_test.ts": 3,
  "unread_body_test.ts": 3,
  "endpoints_test.ts": 3,
  "vertex_test.ts": 2,
  "open_mode_test.ts": 2,
  "chat_proxy_test.ts": 2,
  "process_test.ts": 2,
  "../db/history_writer_test.ts": 2,
  "history_crash_test.ts": 2,
  "deep_json_test.ts": 2,
  "../gateway/formats/cloud/token_source_test.ts": 2,
  "start_cleanup_test.ts": 2,
  "../gateway/formats/bedrock/bedrock_test.ts": 2,
};

/**
 * Files whose tests are mostly one child process of their own (a browser, the bench with its load
 * processes, the type checker): the suite places them in its last shard before any other file, so
 * they run beside the other shards' work, and that shard takes other files only while it is the
 * lightest (tests/suite.ts).
 */
export const CHILD_PROCESS_FILES: readonly string[] = [
  "admin_browser_test.ts",
  "admin_fences_browser_test.ts",
  "admin_fleet_browser_test.ts",
  "admin_sessions_browser_test.ts",
  "bench_quick_test.ts",
  "type_check_test.ts",
];

/**
 * `files` in `count` shards of about equal time: the files `placed` in a shard go there first,
 * then the slowest file first, each to the shard with the least time so far (ties to the first).
 * Each shard keeps the files' sorted order.
 */
export function shardFiles(
  files: readonly string[],
  opts: {
    count: number;
    seconds?: Readonly<Record<string, number>>;
    placed?: readonly (readonly string[])[];
  },
): string[][] {
  const seconds = opts.seconds ?? FILE_SECONDS;
  const cost = (file: string) => seconds[file] ?? 1;
  const shards = Array.from({ length: opts.count }, (_, i) => {
    const placed = files.filter((file) => opts.placed?.[i]?.includes(file));
    return { files: placed, total: placed.reduce((sum, file) => sum + cost(file), 0) };
  });
  const rest = files.filter((file) => !shards.some((s) => s.files.includes(file)));
  const slowestFirst = rest.sort((a, b) => cost(b) - cost(a) || (a < b ? -1 : 1));
  for (const file of slowestFirst) {
    const lightest = shards.reduce((min, s) => s.total < min.total ? s : min);
    lightest.files.push(file);
    lightest.total += cost(file);
  }
  return shards.map((s) => s.files.sort());
}
