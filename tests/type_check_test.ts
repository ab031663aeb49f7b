import assert from "node:assert/strict";

const ROOT = new URL("..", import.meta.url).pathname;

/**
 * `deno task test` runs the suite with `--no-check` (tests/suite.ts), so the type check is this
 * test: the same roots as `deno task check`, read from deno.json so the two cannot drift apart.
 */
Deno.test("every module type-checks, as deno task check checks it", async () => {
  const tasks = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`)).tasks as Record<
    string,
    string
  >;
  const roots = /deno check ([^&]+)/.exec(tasks.check ?? "")?.[1]?.trim().split(/\s+/);
  assert.ok(roots && roots.includes("tests/") && roots.includes("gateway/"), String(tasks.check));
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["check", "--quiet", ...roots],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const log = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 0, `deno check failed:\n${log.slice(-6000)}`);
});
