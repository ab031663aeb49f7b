import assert from "node:assert/strict";
import { CHILD_PROCESS_FILES, MODULE_DIRS, shardFiles, testFiles } from "./test_files.ts";
import { shardModule, SHARDS, suiteShards } from "./suite.ts";

/** Every name `deno test` takes for a test by default: `*_test`, `*.test` and `test`. */
const DENO_TEST_NAME = /(^|[._])test\.(ts|tsx|mts|js|jsx|mjs)$/;

async function denoWouldRun(dir: URL, prefix = ""): Promise<string[]> {
  const found: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const name = `${prefix}${entry.name}`;
    if (entry.isDirectory) {
      found.push(...await denoWouldRun(new URL(`${entry.name}/`, dir), `${name}/`));
    } else if (DENO_TEST_NAME.test(entry.name)) found.push(name);
  }
  return found.sort();
}

Deno.test("the suite imports every file deno test would run under tests/ and beside the modules, helpers none", async () => {
  const files = await testFiles();
  const beside = await Promise.all(
    MODULE_DIRS.map(async (dir) =>
      (await denoWouldRun(new URL(dir, import.meta.url))).map((name) => `${dir}${name}`)
    ),
  );
  const own = await denoWouldRun(new URL("./", import.meta.url));
  assert.deepEqual(files, [...own, ...beside.flat()].sort());
  assert.ok(files.includes("suite_test.ts") && files.includes("agents/codex_test.ts"));
  assert.ok(!files.includes("suite.ts") && !files.includes("harness.ts"));
});

Deno.test("the suite's shards hold every test file once, each run by its own module", async () => {
  const files = await testFiles();
  const shards = suiteShards(files);
  assert.deepEqual(shards.flat().sort(), files);
  assert.deepEqual(Array.from({ length: SHARDS }, (_, i) => shardModule(i)), [
    "tests/suite_a.ts",
    "tests/suite_b.ts",
    "tests/suite_c.ts",
  ]);
  // Each child-process file is a test file still, and runs in the last shard.
  for (const file of CHILD_PROCESS_FILES) assert.ok(shards.at(-1)!.includes(file), file);
  for (let i = 0; i < SHARDS; i++) {
    const source = await Deno.readTextFile(new URL(`../${shardModule(i)}`, import.meta.url));
    assert.match(source, new RegExp(`importShard\\(${i}\\)`), shardModule(i));
  }
  const tasks = JSON.parse(await Deno.readTextFile(new URL("../deno.json", import.meta.url))).tasks;
  assert.match(tasks.test, /deno run -A tests\/run_suite\.ts$/);
});

Deno.test("shards: the slowest file first, each to the shard with the least time so far", () => {
  const seconds = { "a_test.ts": 5, "b_test.ts": 3, "c_test.ts": 2 };
  const files = ["d_test.ts", "c_test.ts", "b_test.ts", "a_test.ts"];
  assert.deepEqual(shardFiles(files, { count: 2, seconds }), [
    ["a_test.ts", "d_test.ts"],
    ["b_test.ts", "c_test.ts"],
  ]);
  assert.deepEqual(shardFiles(files, { count: 1, seconds }), [[...files].sort()]);
});

Deno.test("suite shards: the child-process files in the last, which takes others while it is the lightest", () => {
  const seconds = { "a_test.ts": 5, "b_test.ts": 3, "c_test.ts": 2, "p_test.ts": 50 };
  const files = ["a_test.ts", "b_test.ts", "c_test.ts", "d_test.ts", "p_test.ts", "q_test.ts"];
  assert.deepEqual(suiteShards(files, { seconds, own: ["q_test.ts", "p_test.ts"] }), [
    ["a_test.ts", "d_test.ts"],
    ["b_test.ts", "c_test.ts"],
    ["p_test.ts", "q_test.ts"],
  ]);
  assert.deepEqual(suiteShards(files, { seconds, own: ["q_test.ts"] }), [
    ["p_test.ts"],
    ["a_test.ts", "d_test.ts"],
    ["b_test.ts", "c_test.ts", "q_test.ts"],
  ]);
});
