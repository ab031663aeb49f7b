const TESTS_DIR = new URL("./", import.meta.url);

/** Every `*_test.ts(x)` under `dir`, relative to it and sorted: what tests/suite.ts imports. */
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
