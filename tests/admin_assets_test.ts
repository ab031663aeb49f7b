import assert from "node:assert/strict";
import { buildAssets, OUTPUT, renderAssetsModule } from "../admin/build_assets.ts";
import { spawnGateway } from "./spawn_gateway.ts";

const ROOT = new URL("..", import.meta.url);
const STALE = `${OUTPUT} is stale: run \`deno task admin:build\` and commit the result`;

Deno.test("admin/assets.gen.ts matches a fresh bundle of admin/client/", async () => {
  const committed = await Deno.readTextFile(new URL(OUTPUT, ROOT)).catch(() => "");
  assert.ok(committed === await renderAssetsModule(await buildAssets()), STALE);
});

Deno.test("the page and its assets are served with file reads limited to the data directory", async () => {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-admin-proc-" });
  const { child, url, log } = await spawnGateway(dir, {
    env: { PULSEGATE_ADMIN_TOKEN: "proc-token" },
  });
  try {
    assert.doesNotMatch(log, /proc-token/, "the admin token is never logged");
    const html = await (await fetch(`${url}/admin`)).text();
    assert.match(html, /SIMULATED/);
    const assets = [...html.matchAll(/"(\/admin\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    assert.equal(assets.length, 2);
    for (const path of assets) {
      const res = await fetch(`${url}${path}`);
      assert.equal(res.status, 200, path);
      assert.ok((await res.text()).length > 1000, `${path} has its content`);
    }
    const api = await fetch(`${url}/admin/api/session`, {
      headers: { authorization: "Bearer proc-token" },
    });
    assert.equal(api.status, 200);
    assert.equal((await api.json()).demo, true);
  } finally {
    child.kill("SIGTERM");
    assert.equal((await child.status).code, 0);
  }
});
