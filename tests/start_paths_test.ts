import assert from "node:assert/strict";
import { openDatabase } from "../db/client.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";
import { chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { spawnGateway, untilListening } from "./spawn_gateway.ts";

const ROOT = new URL("..", import.meta.url).pathname;

/** `deno task start` exactly as the README gives it, from the repository root. */
function taskStart(env: Record<string, string>): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: ["task", "start"],
    cwd: ROOT,
    env: { PULSEGATE_PORT: "0", NO_COLOR: "1", ...env },
    stdout: "null",
    stderr: "piped",
  }).spawn();
}

Deno.test("deno task start runs with the config file and a file: database outside the checkout", async () => {
  const up = startFakeUpstream({ fallback: () => chatWhole({ text: ["from the fake upstream"] }) });
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-paths-" });
  const config = `${dir}/etc/config.json`;
  const dbFile = `${dir}/var/lib/pulsegate/pg.db`; // its folder does not exist yet
  await Deno.mkdir(`${dir}/etc`);
  await Deno.writeTextFile(
    config,
    JSON.stringify({
      upstreams: [{ id: "up1", kind: "openai-chat", base_url: up.url }],
      routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "m" }] }],
    }),
  );
  const child = taskStart({ PULSEGATE_CONFIG: config, PULSEGATE_DB_URL: `file:${dbFile}` });
  try {
    const { url } = await untilListening(child);
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": "paths-1" },
      body: JSON.stringify({ model: "smart", messages: [{ role: "user", content: "hi" }] }),
    });
    assert.equal(res.status, 200);
    assert.equal((await res.json()).choices[0].message.content, "from the fake upstream");
    assert.equal(up.calls.length, 1, "the request went through the configured upstream");
  } finally {
    child.kill("SIGTERM");
    await up.close();
  }
  assert.equal((await child.status).code, 0, "SIGTERM through the task stops the gateway cleanly");
  const db = await openDatabase(`file:${dbFile}`);
  try {
    const rows = await db.client.execute("SELECT id, state, status FROM requests");
    assert.deepEqual(
      rows.rows.map((r) => [r.id, r.state, r.status]),
      [["paths-1", "closed", 200]],
    );
  } finally {
    db.close();
  }
  await Deno.remove(dir, { recursive: true });
});

/** What the gateway said on stderr, without the command line `deno task` echoes first. */
async function failure(child: Deno.ChildProcess): Promise<{ code: number; said: string[] }> {
  const [status, stderr] = await Promise.all([child.status, new Response(child.stderr).text()]);
  const said = stderr.split("\n").filter((l) => l !== "" && !l.startsWith("Task start"));
  assert.doesNotMatch(said.join("\n"), /NotFound|NotCapable|AlreadyExists|\bat \S+ \(|--allow-/);
  return { code: status.code, said };
}

Deno.test("a config path that does not exist gives one line naming the setting, and exit 1", async () => {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-paths-" });
  const missing = `${dir}/etc/nope.json`;
  const child = taskStart({ PULSEGATE_CONFIG: missing, PULSEGATE_DB_URL: `file:${dir}/pg.db` });
  assert.deepEqual(await failure(child), {
    code: 1,
    said: [
      `pulsegate: PULSEGATE_CONFIG: cannot use ${missing}: it does not exist; ` +
      "set PULSEGATE_CONFIG to a readable JSON config file (or unset it for the demo)",
    ],
  });
  await Deno.remove(dir, { recursive: true });
});

Deno.test("a database folder that cannot be created gives one line naming PULSEGATE_DB_URL", async () => {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-paths-" });
  await Deno.writeTextFile(`${dir}/not-a-folder`, "");
  const dbFile = `${dir}/not-a-folder/pg.db`;
  const child = taskStart({ PULSEGATE_DB_URL: `file:${dbFile}` });
  assert.deepEqual(await failure(child), {
    code: 1,
    said: [
      `pulsegate: PULSEGATE_DB_URL: cannot use ${dbFile}: a part of it is a file, not a folder; ` +
      "set PULSEGATE_DB_URL to file:<path> in a folder this user may create and write",
    ],
  });
  await Deno.remove(dir, { recursive: true });
});

Deno.test("main.ts run without the launcher's grants names the setting and the fix", async () => {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-paths-" });
  const outside = await Deno.makeTempDir({ prefix: "pulsegate-paths-cfg-" });
  const config = `${outside}/config.json`;
  await Deno.writeTextFile(config, "{}");
  const err = await spawnGateway(dir, { env: { PULSEGATE_CONFIG: config } }).then(
    () => assert.fail("the gateway started without access to its config"),
    (e: Error) => e.message,
  );
  assert.equal(
    err.split("\n").filter((l) => l !== "").slice(1).join("\n"),
    `pulsegate: PULSEGATE_CONFIG: cannot use ${config}: this process was not granted access ` +
      "to it; start with `deno task start`, which grants the paths PULSEGATE_CONFIG and " +
      "PULSEGATE_DB_URL name",
  );
  await Deno.remove(dir, { recursive: true });
  await Deno.remove(outside, { recursive: true });
});
