import assert from "node:assert/strict";
import { untilListening } from "./spawn_gateway.ts";

/**
 * docs/deploy.md: `deno task start` on a fresh checkout fetches only what the server needs and
 * prints no warning. The server runs under deno.server.json (its own import map and lockfile);
 * the root deno.json adds the SDKs and browser driver that only the tests use.
 */
const ROOT = new URL("..", import.meta.url).pathname;
const TEST_ONLY = ["openai", "@anthropic-ai/sdk", "@google/genai", "playwright-core", "protobufjs"];

interface DenoConfig {
  imports: Record<string, string>;
  compilerOptions: unknown;
  unstable?: string[];
}

async function readJson<T>(name: string): Promise<T> {
  return JSON.parse(await Deno.readTextFile(`${ROOT}/${name}`)) as T;
}

/** `name@1.2.3_peer@4` and `npm:/name@1.2.3/path` both name package `name`. */
function packageName(id: string): string {
  const bare = id.replace(/^npm:\/?/, "");
  const at = bare.indexOf("@", 1);
  return at < 0 ? bare : bare.slice(0, at);
}

Deno.test("the server's config is the root's import map narrowed to what the server imports", async () => {
  const root = await readJson<DenoConfig>("deno.json");
  const server = await readJson<DenoConfig>("deno.server.json");
  for (const [name, target] of Object.entries(server.imports)) {
    assert.equal(root.imports[name], target, `${name} is pinned alike in both configs`);
  }
  assert.deepEqual(server.compilerOptions, root.compilerOptions);
  assert.deepEqual(server.unstable, root.unstable);
  for (const name of TEST_ONLY) {
    assert.equal(server.imports[name], undefined, `${name} is not the server's`);
  }
});

Deno.test("main.ts resolves under the server's config to no test-only package", async () => {
  const info = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", "--config", "deno.server.json", "main.ts"],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(info.code, 0, new TextDecoder().decode(info.stderr));
  const graph = JSON.parse(new TextDecoder().decode(info.stdout)) as {
    npmPackages: Record<string, unknown>;
  };
  const inGraph = new Set(Object.keys(graph.npmPackages).map(packageName));
  assert.ok(inGraph.has("@libsql/client") && inGraph.has("hono"), "the graph was read");
  const lock = await readJson<{ npm?: Record<string, unknown> }>("deno.server.lock");
  const locked = new Set(Object.keys(lock.npm ?? {}).map(packageName));
  for (const name of TEST_ONLY) {
    assert.equal(inGraph.has(name), false, `main.ts does not load ${name}`);
    assert.equal(locked.has(name), false, `deno.server.lock does not list ${name}`);
  }
});

Deno.test("deno task start on a checkout without node_modules prints no warning and installs nothing", async () => {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-fresh-" });
  const files = ["deno.json", "deno.lock", "deno.server.json", "deno.server.lock", "main.ts"];
  const copy = await new Deno.Command("cp", {
    args: ["-r", ...files, "launch.ts", "gateway", "admin", "db", dir],
    cwd: ROOT,
  }).output();
  assert.equal(copy.code, 0);
  const child = new Deno.Command(Deno.execPath(), {
    args: ["task", "start"],
    cwd: dir,
    env: { PULSEGATE_PORT: "0", PULSEGATE_DB_URL: `file:${dir}/data/pulsegate.db`, NO_COLOR: "1" },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  try {
    const { url, log } = await untilListening(child);
    assert.doesNotMatch(log, /warning/i, log);
    assert.doesNotMatch(log, /Initialize/, "nothing is installed into node_modules");
    const ready = await fetch(`${url}/readyz`);
    assert.equal(ready.status, 200);
    await ready.body?.cancel();
    const made = [...Deno.readDirSync(dir)].map((e) => e.name);
    assert.equal(made.includes("node_modules"), false, "the server needs no node_modules folder");
  } finally {
    child.kill("SIGTERM");
    assert.equal((await child.status).code, 0);
    await Deno.remove(dir, { recursive: true });
  }
});
