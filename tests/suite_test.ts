import assert from "node:assert/strict";
import { testFiles } from "./test_files.ts";

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

Deno.test("the suite imports every file deno test would run under tests/, helpers none", async () => {
  const files = await testFiles();
  assert.deepEqual(files, await denoWouldRun(new URL("./", import.meta.url)));
  assert.ok(files.includes("suite_test.ts") && files.includes("agents/codex_test.ts"));
  assert.ok(!files.includes("suite.ts") && !files.includes("harness.ts"));
});
