import assert from "node:assert/strict";
import { openDatabase } from "../db/client.ts";

/**
 * Runs a start that fails in its own process and returns what it printed. The process returns
 * from its script without calling exit, so it ends only when the failed start left no worker
 * thread, timer or server running; one that is still alive after `ms` is killed and reported.
 */
async function failingStart(dir: string, how: string, ms = 20_000): Promise<string> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "tests/fixtures/failing_start.ts", dir, how],
    cwd: new URL("..", import.meta.url).pathname,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const timer = setTimeout(() => child.kill("SIGKILL"), ms);
  try {
    const { code, stdout, stderr } = await child.output();
    const out = new TextDecoder().decode(stdout);
    assert.equal(
      code,
      0,
      `still running after a failed start (killed):\n${out}\n${new TextDecoder().decode(stderr)}`,
    );
    return out;
  } finally {
    clearTimeout(timer);
  }
}

/** The database a failed start left is whole: the next start finds it migrated. */
async function assertDatabaseUsable(dir: string): Promise<void> {
  const db = await openDatabase(`file:${dir}/pulsegate.db`);
  try {
    const applied = await db.client.execute("SELECT count(*) AS n FROM schema_version");
    assert.ok(Number(applied.rows[0]?.n) > 0, "the start got as far as migrating the database");
  } finally {
    db.close();
  }
}

Deno.test("a process whose config file fails to load ends by itself: nothing is left open", async () => {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-start-" });
  try {
    assert.equal(await failingStart(dir, "bad-config"), "failed: ConfigFileError\n");
    await assertDatabaseUsable(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a process whose port is in use ends by itself after the failed start", async () => {
  const holder = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-start-" });
  try {
    assert.equal(await failingStart(dir, `port=${holder.addr.port}`), "failed: AddrInUse\n");
    await assertDatabaseUsable(dir);
  } finally {
    holder.close();
    await Deno.remove(dir, { recursive: true });
  }
});
