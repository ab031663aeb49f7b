import assert from "node:assert/strict";
import type { ConfigSaved } from "../admin/api_types.ts";
import type { ConfigVersion, ConfigVersionList } from "../admin/config_versions_types.ts";
import { openDatabase } from "../db/client.ts";
import { loadStoredConfig, storeConfig } from "../db/config_store.ts";
import { configVersionStatement, listConfigVersions } from "../db/config_versions.ts";
import { migrate } from "../db/migrate.ts";
import { MIGRATIONS } from "../db/migrations.ts";
import { configChanges, diffConfig } from "../admin/client/config_diff.ts";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { ADMIN, adminFetch, dirWithStoredConfig } from "./admin_helpers.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";
import { chatRoute, type TestGateway, withGateway } from "./harness.ts";

const withAdmin = (run: (gw: TestGateway) => Promise<void>, opts: { dir?: string } = {}) =>
  withGateway(run, {
    config: opts.dir ? () => undefined : undefined,
    dir: opts.dir,
    env: { PULSEGATE_ADMIN_TOKEN: ADMIN },
  });

async function versions(gw: TestGateway) {
  const res = await adminFetch(gw, "/admin/api/config/versions");
  assert.equal(res.status, 200);
  return ((await res.json()) as ConfigVersionList).versions;
}

const summary = (list: Awaited<ReturnType<typeof versions>>) =>
  list.map((v) => [v.id, v.savedBy, v.restoredFrom, v.current]);

Deno.test("config versions: the file at start, each admin save, no version for no change, a rollback", async () => {
  await withAdmin(async (gw) => {
    assert.deepEqual(summary(await versions(gw)), [[1, "file", null, true]]);
    const first = (await loadStoredConfig(gw.db))!.body as ConfigInput;
    const idle = gw.state.config?.failover.idle_timeout_secs;
    assert.notEqual(idle, 60);
    const changed = { ...first, failover: { idle_timeout_secs: 60 } };
    const put = (body: unknown) => adminFetch(gw, "/admin/api/config", { method: "PUT", body });
    assert.equal((await put(changed)).status, 200);
    assert.equal(gw.state.config?.failover.idle_timeout_secs, 60);
    assert.equal((await put(changed)).status, 200, "the same again");
    const list = await versions(gw);
    assert.deepEqual(summary(list), [[2, "admin", null, true], [1, "file", null, false]]);
    assert.ok(Math.abs(list[0]!.savedAt - Date.now()) < 60_000);

    const one = await adminFetch(gw, "/admin/api/config/versions/1");
    assert.deepEqual(((await one.json()) as ConfigVersion).body, first);

    const back = await adminFetch(gw, "/admin/api/config/versions/1/rollback", { body: {} });
    assert.equal(back.status, 200);
    assert.deepEqual(((await back.json()) as ConfigSaved).config, first);
    assert.equal(gw.state.config?.failover.idle_timeout_secs, idle, "in force at once");
    assert.deepEqual((await loadStoredConfig(gw.db))!.body, first);
    assert.deepEqual(summary(await versions(gw)), [
      [3, "admin", 1, true],
      [2, "admin", null, false],
      [1, "file", null, false], // the same body, but version 3 is the one in force
    ]);

    for (
      const path of [
        "/admin/api/config/versions/9/rollback",
        "/admin/api/config/versions/x/rollback",
      ]
    ) {
      const missing = await adminFetch(gw, path, { body: {} });
      assert.equal(missing.status, 404, path);
      assert.equal((await missing.json()).error.code, "admin.config_version_not_found");
    }
    assert.equal((await adminFetch(gw, "/admin/api/config/versions/9")).status, 404);
    assert.equal(
      (await adminFetch(gw, "/admin/api/config/versions", { token: null })).status,
      401,
    );
  });
});

Deno.test("config versions: a version that no longer validates is refused with its problems", async () => {
  await withAdmin(async (gw) => {
    const bad = JSON.stringify({ upstreams: [], routes: [], surprise: 1 });
    await gw.db.client.execute(configVersionStatement(bad, { by: "admin", at: Date.now() }));
    const res = await adminFetch(gw, "/admin/api/config/versions/2/rollback", { body: {} });
    assert.equal(res.status, 400);
    const body = await res.json();
    assert.equal(body.error.code, "config.invalid");
    assert.match(body.error.message, /^version 2: /);
    assert.ok(body.problems.some((p: { path: string }) => p.path === "surprise"));
    assert.equal(gw.state.config?.upstreams.length, 1, "nothing changed");
  });
});

Deno.test("config versions: a safe-mode repair is kept as saved by repair", async () => {
  const up = startFakeUpstream();
  const config = chatRoute([up.url]);
  const dir = await dirWithStoredConfig({ ...config, failover: { idle_timeout: 30 } });
  try {
    await withAdmin(async (gw) => {
      assert.deepEqual(await versions(gw), [], "stored by a release that kept no versions");
      const res = await adminFetch(gw, "/admin/api/config/repair", { body: {} });
      assert.equal(res.status, 200);
      assert.deepEqual(summary(await versions(gw)), [[1, "repair", null, true]]);
    }, { dir });
  } finally {
    await up.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("config versions: migration 14 keeps the config stored before it as the first version", async () => {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-versions-" });
  const db = await openDatabase(`file:${dir}/pulsegate.db`);
  try {
    await migrate(db, { migrations: MIGRATIONS.filter((m) => m.version < 14) });
    await storeConfig(db, { upstreams: [], routes: [] }, { now: 1234 });
    const result = await migrate(db);
    assert.ok(result.applied.includes(14));
    const list = await listConfigVersions(db, { limit: 10 });
    assert.deepEqual(list, [
      { id: 1, savedBy: "stored", savedAt: 1234, restoredFrom: null, current: true },
    ]);
    // A restart with the same file stores the same body: no new version.
    await storeConfig(db, { upstreams: [], routes: [] }, { now: 5678, by: "file" });
    assert.equal((await listConfigVersions(db, { limit: 10 })).length, 1);
  } finally {
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("config diff: changed, added and removed keys by key path, array items by index", () => {
  const before = {
    failover: { idle_timeout_secs: 30, pause_secs: 60 },
    upstreams: [{ id: "a" }, { id: "b" }],
  };
  const after = {
    failover: { pause_secs: 60, idle_timeout_secs: 90, hedge_after_secs: 2 },
    upstreams: [{ id: "a", enabled: false }],
  };
  assert.deepEqual(diffConfig(before, after), [
    { path: "failover.idle_timeout_secs", kind: "changed", before: 30, after: 90 },
    { path: "failover.hedge_after_secs", kind: "added", after: 2 },
    { path: "upstreams.0.enabled", kind: "added", after: false },
    { path: "upstreams.1", kind: "removed", before: { id: "b" } },
  ]);
  assert.deepEqual(diffConfig(before, structuredClone(before)), [], "no change, key order aside");
  assert.deepEqual(diffConfig({}, "text"), [
    { path: "", kind: "changed", before: {}, after: "text" },
  ]);
});

Deno.test("config diff: a pool's weights are shown as the shares they give, before and after", () => {
  const pool = (weights: number[], pick?: string) => ({
    routes: [{
      model: "smart",
      candidates: [{
        ...(pick ? { pick } : {}),
        pool: weights.map((weight, i) => ({ upstream: `key-${i}`, model: "m", weight })),
      }, { upstream: "backup", model: "m" }],
    }],
  });
  const plain = { routes: [{ model: "smart", candidates: [{ upstream: "key-0", model: "m" }] }] };
  assert.deepEqual(configChanges(pool([1, 1]), pool([3, 1])), [
    { path: "routes.0.candidates.0.pool.0.weight", kind: "changed", before: 1, after: 3 },
    {
      path: "routes.0.candidates.0.pool (shares)",
      kind: "changed",
      before: "key-0 50 %, key-1 50 %",
      after: "key-0 75 %, key-1 25 %",
    },
  ]);
  const added = configChanges(plain, pool([2, 1, 1], "least_latency"));
  assert.deepEqual(added.at(-1), {
    path: "routes.0.candidates.0.pool (shares)",
    kind: "added",
    after: "least_latency; equals split key-0 50 %, key-1 25 %, key-2 25 %",
  });
  assert.equal(configChanges(pool([3, 1]), plain).at(-1)?.kind, "removed");
  assert.deepEqual(configChanges(pool([3, 1]), structuredClone(pool([3, 1]))), []);
});
