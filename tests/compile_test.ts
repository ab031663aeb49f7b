import assert from "node:assert/strict";

const denort = Deno.env.get("DENORT_BIN");
const ROOT = new URL("..", import.meta.url).pathname;

// `deno compile` downloads its base runtime from Deno's release host, which
// these machines cannot reach; with DENORT_BIN pointing at one, it runs here.
if (!denort) {
  console.log("compile test SKIPPED: set DENORT_BIN to a denort binary to build the executable");
}

Deno.test({
  name: "deno task compile builds a single executable that serves the admin page",
  ignore: !denort,
  async fn() {
    const out = await Deno.makeTempDir({ prefix: "pulsegate-compile-" });
    const build = await new Deno.Command(Deno.execPath(), {
      args: ["task", "compile"],
      cwd: ROOT,
      env: { DENORT_BIN: denort! },
    }).output();
    assert.equal(build.code, 0, new TextDecoder().decode(build.stderr));
    const bin = `${ROOT}/dist/pulsegate`;
    const child = new Deno.Command(bin, {
      cwd: out,
      env: { PULSEGATE_PORT: "18931", PULSEGATE_DB_URL: `file:${out}/data/p.db` },
      stderr: "null",
      stdout: "null",
    }).spawn();
    try {
      let res: Response | null = null;
      for (let i = 0; i < 50 && !res; i++) {
        res = await fetch("http://127.0.0.1:18931/admin").catch(() => null);
        if (!res) await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(res?.status, 200);
      assert.match(await res!.text(), /pulsegate/);
    } finally {
      child.kill("SIGTERM");
      await child.status;
    }
  },
});
