/**
 * The layering of the tree (docs/architecture.md "Layout"), as data: each
 * folder may import its own layer and the layers before it in this list,
 * never one after it. `deno task check` runs this; tests/layers_test.ts too.
 * Folders are matched by prefix, the longest first (formats/anthropic/ is of
 * the formats layer). bench/, tests/ and tools/ stand outside: they may use
 * anything.
 */
export const LAYERS: readonly (readonly string[])[] = [
  ["gateway/runtime/"],
  ["db/"],
  ["gateway/config/"],
  ["gateway/formats/"],
  ["gateway/live/"],
  ["gateway/route/"],
  ["gateway/forward/"],
  ["gateway/policy/"],
  ["gateway/accept/"],
  ["gateway/mcp/"],
  ["gateway/endpoints/"],
  ["gateway/observability/"],
  ["gateway/demo/"],
  ["admin/"],
  ["gateway/start/"],
  ["main.ts", "launch.ts"],
];

/** The layer a repository path belongs to, or -1 when it stands outside the layering. */
export function layerOf(path: string): number {
  let best = -1;
  let length = 0;
  LAYERS.forEach((prefixes, layer) => {
    for (const prefix of prefixes) {
      if ((path === prefix || path.startsWith(prefix)) && prefix.length > length) {
        best = layer;
        length = prefix.length;
      }
    }
  });
  return best;
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\b[^;'"]*?\bfrom\s*["'](\.{1,2}\/[^"']+)["']/g;

/** Every relative import that runs against the layering: "a.ts -> b.ts (layer 3 -> 7)". */
export async function layerViolations(root: URL): Promise<string[]> {
  const found: string[] = [];
  for await (const path of sources(root, "")) {
    const from = layerOf(path);
    if (from < 0 && /^(gateway|admin|db)\//.test(path)) found.push(`${path} is in no layer`);
    if (from < 0) continue;
    const text = await Deno.readTextFile(new URL(path, root));
    for (const match of text.matchAll(IMPORT)) {
      const target = new URL(match[1]!, new URL(path, root)).pathname.slice(root.pathname.length);
      const to = layerOf(target);
      if (to > from) found.push(`${path} -> ${target} (${LAYERS[from]} -> ${LAYERS[to]})`);
    }
  }
  return found.sort();
}

async function* sources(root: URL, dir: string): AsyncGenerator<string> {
  for await (const entry of Deno.readDir(new URL(dir || ".", root))) {
    const path = `${dir}${entry.name}`;
    if (entry.isDirectory) {
      if (!["node_modules", "data", "dist", ".git"].includes(entry.name)) {
        yield* sources(root, `${path}/`);
      }
    } else if (/\.tsx?$/.test(entry.name)) yield path;
  }
}

if (import.meta.main) {
  const found = await layerViolations(new URL("../", import.meta.url));
  if (found.length) {
    console.error(`${found.length} imports run against the layering (tools/layers.ts):`);
    for (const line of found) console.error(`  ${line}`);
    Deno.exit(1);
  }
}
