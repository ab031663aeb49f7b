/**
 * The docs and the code's comments cite each other: a path (`gateway/forward/verdict.ts`) or a
 * section (`docs/design.md "Pulse"`). Each must still be there, so a regroup or a rewrite that
 * leaves a reference behind fails here instead of misleading the next reader.
 */
import assert from "node:assert/strict";

const ROOT = new URL("../", import.meta.url);
const SCANNED_DIRS = ["gateway", "admin", "db", "tests", "bench", "tools", "docs"];
const SKIPPED = /(^|\/)(node_modules|data|dist)(\/|$)|\.gen\.ts$|results\.json$/;

/** Repository paths a text names: `gateway/forward/hop.ts`, `docs/liveness.md`. */
const PATH = /(?<![\w./-])((?:gateway|admin|db|tests|bench|tools|docs)\/[\w./-]*\w\.(?:tsx?|md))/g;
/** A section cited by its heading: `design.md "Pulse"` or `design.md, "Hedged start"`. */
const SECTION = /\b([a-z_]+)\.md,? "([^"\n]+)"/g;

async function* files(dir: string): AsyncGenerator<string> {
  for await (const entry of Deno.readDir(new URL(dir, ROOT))) {
    const path = `${dir}/${entry.name}`;
    if (SKIPPED.test(path)) continue;
    if (entry.isDirectory) yield* files(path);
    else if (/\.(tsx?|md)$/.test(entry.name)) yield path;
  }
}

async function texts(): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const file of ["README.md", "main.ts", "launch.ts"]) {
    out.set(file, await Deno.readTextFile(new URL(file, ROOT)));
  }
  for (const dir of SCANNED_DIRS) {
    for await (const file of files(dir)) {
      out.set(file, await Deno.readTextFile(new URL(file, ROOT)));
    }
  }
  return out;
}

function exists(path: string): boolean {
  try {
    Deno.statSync(new URL(path, ROOT));
    return true;
  } catch {
    return false;
  }
}

/** Each doc's headings, lower-cased. */
async function headings(): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  for await (const entry of Deno.readDir(new URL("docs", ROOT))) {
    if (!entry.name.endsWith(".md")) continue;
    const text = await Deno.readTextFile(new URL(`docs/${entry.name}`, ROOT));
    const heads = text.split("\n").filter((l) => l.startsWith("#"))
      .map((l) => l.replace(/^#+\s*/, "").toLowerCase());
    out.set(entry.name.replace(/\.md$/, ""), heads);
  }
  return out;
}

Deno.test("every repository path the docs and comments name exists", async () => {
  const missing: string[] = [];
  for (const [file, text] of await texts()) {
    for (const [, path] of text.matchAll(PATH)) {
      // A path built in a test's temporary tree, or a pattern, is no reference.
      if (file === "tests/layers_test.ts" || file === "tests/docs_refs_test.ts") continue;
      if (!exists(path!)) missing.push(`${file}: ${path}`);
    }
  }
  assert.deepEqual([...new Set(missing)], []);
});

Deno.test("every section the docs and comments cite is a heading of that doc", async () => {
  const heads = await headings();
  const missing: string[] = [];
  for (const [file, text] of await texts()) {
    if (file === "tests/docs_refs_test.ts") continue;
    for (const [, doc, section] of text.matchAll(SECTION)) {
      const known = heads.get(doc!);
      if (!known) continue; // README.md, CHANGELOG.md and the like: no sections cited there
      const wanted = section!.toLowerCase();
      if (!known.some((h) => h.includes(wanted))) missing.push(`${file}: ${doc}.md "${section}"`);
    }
  }
  assert.deepEqual([...new Set(missing)], []);
});

Deno.test("nothing in the code, the tests or the bench names an issue number", async () => {
  const named: string[] = [];
  for (const [file, text] of await texts()) {
    if (file.startsWith("docs/") || file === "tests/docs_refs_test.ts") continue;
    for (const match of text.matchAll(/\bissues? #?\d+|\bissue \d+'s\b|\(issue \d+\)/gi)) {
      named.push(`${file}: ${match[0]}`);
    }
  }
  assert.deepEqual(named, []);
});
