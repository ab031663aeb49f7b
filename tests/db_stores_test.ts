import assert from "node:assert/strict";
import { loadStoredConfig, storeConfig } from "../db/config_store.ts";
import {
  claimProbe,
  type CooldownRow,
  deleteCooldown,
  loadCooldowns,
  releaseProbe,
  saveCooldown,
} from "../db/cooldown_store.ts";
import { openDatabase } from "../db/client.ts";
import { withTempDb } from "./db_helpers.ts";

Deno.test("config: nothing stored reads as null", async () => {
  await withTempDb(async ({ db }) => {
    assert.equal(await loadStoredConfig(db), null);
  });
});

Deno.test("config: a stored body round-trips and the latest store wins", async () => {
  await withTempDb(async ({ db }) => {
    const first = { failover: { idle_timeout_secs: 300 }, upstreams: [], routes: [] };
    await storeConfig(db, first, { now: 10 });
    assert.deepEqual(await loadStoredConfig(db), { body: first, updatedAt: 10, version: 1 });
    const second = { ...first, failover: { idle_timeout_secs: 60 } };
    await storeConfig(db, second, { now: 20 });
    assert.deepEqual(await loadStoredConfig(db), { body: second, updatedAt: 20, version: 2 });
    const rows = await db.client.execute("SELECT COUNT(*) AS n FROM config");
    assert.equal(rows.rows[0]?.n, 1);
  });
});

Deno.test("config: text that is not JSON comes back as the text, for safe mode", async () => {
  await withTempDb(async ({ db }) => {
    await storeConfig(db, '{"failover": {', { now: 5 });
    assert.deepEqual(await loadStoredConfig(db), {
      body: '{"failover": {',
      updatedAt: 5,
      version: 1,
    });
  });
});

Deno.test("config: a body JSON cannot hold is refused", async () => {
  await withTempDb(async ({ db }) => {
    await assert.rejects(storeConfig(db, undefined, { now: 5 }), TypeError);
    assert.equal(await loadStoredConfig(db), null);
  });
});

Deno.test("cooldowns: rows round-trip, update in place and can be deleted", async () => {
  await withTempDb(async ({ db }) => {
    assert.deepEqual(await loadCooldowns(db), []);
    const paused: CooldownRow = {
      upstream: "openai",
      model: null,
      consecutiveFailures: 3,
      pauseCount: 2,
      pausedUntil: 1_700_000_120_000,
      reason: "3 failures in a row; last: gw.upstream.error",
      probeUntil: null,
      updatedAt: 1_700_000_000_000,
    };
    const healthy: CooldownRow = {
      upstream: "claude",
      model: null,
      consecutiveFailures: 1,
      pauseCount: 0,
      pausedUntil: null,
      reason: null,
      probeUntil: null,
      updatedAt: 1_700_000_000_500,
    };
    await saveCooldown(db, paused);
    await saveCooldown(db, healthy);
    assert.deepEqual(await loadCooldowns(db), [healthy, paused]);

    const reset = {
      ...paused,
      consecutiveFailures: 0,
      pauseCount: 0,
      pausedUntil: null,
      reason: null,
    };
    await saveCooldown(db, reset);
    assert.deepEqual(await loadCooldowns(db), [healthy, reset]);

    await deleteCooldown(db, "claude");
    assert.deepEqual(await loadCooldowns(db), [reset]);
  });
});

Deno.test("cooldowns: a member's row (upstream and model) is its own, beside its upstream's; its probe is claimed once", async () => {
  await withTempDb(async ({ db }) => {
    const row = (model: string | null, over: Partial<CooldownRow> = {}): CooldownRow => ({
      upstream: "up",
      model,
      consecutiveFailures: 0,
      pauseCount: 1,
      pausedUntil: 1_000,
      reason: "3 failures in a row; last: gw.upstream.error",
      probeUntil: null,
      updatedAt: 500,
      ...over,
    });
    const whole = row(null, { pausedUntil: null, pauseCount: 0, reason: null });
    // A model name may hold a "/" and more: it is a column, not part of a key's text.
    const slashed = row("org/model-a:1");
    await saveCooldown(db, whole);
    await saveCooldown(db, row("cheap"));
    await saveCooldown(db, slashed);
    assert.deepEqual(await loadCooldowns(db), [whole, row("cheap"), slashed]);
    // The upstream's own row stays where an older release reads it.
    const legacy = await db.client.execute("SELECT upstream FROM cooldowns");
    assert.deepEqual(legacy.rows.map((r) => r.upstream), ["up"]);

    // Two instances claim the member's probe when its pause ended: one wins.
    const claim = { upstream: "up", model: "cheap", now: 2_000, until: 9_000 };
    assert.equal(await claimProbe(db, claim), "claimed");
    const lost = await claimProbe(db, { ...claim, until: 9_500 });
    assert.notEqual(lost, "claimed");
    assert.equal(typeof lost === "object" && lost.probeUntil, 9_000);
    // Its sibling and its upstream are untouched.
    const stored = await loadCooldowns(db);
    assert.deepEqual(stored.map((r) => [r.model, r.probeUntil]), [
      [null, null],
      ["cheap", 9_000],
      ["org/model-a:1", null],
    ]);
    // Given back only by its holder.
    await releaseProbe(db, { upstream: "up", model: "cheap", until: 9_500 });
    assert.equal((await loadCooldowns(db))[1]!.probeUntil, 9_000);
    await releaseProbe(db, { upstream: "up", model: "cheap", until: 9_000 });
    assert.equal((await loadCooldowns(db))[1]!.probeUntil, null);

    await deleteCooldown(db, "up");
    assert.deepEqual(await loadCooldowns(db), []);
  });
});

Deno.test("a write refused by a lock does not poison later writes", async () => {
  await withTempDb(async ({ db, url }) => {
    const row: CooldownRow = {
      upstream: "openai",
      model: null,
      consecutiveFailures: 1,
      pauseCount: 0,
      pausedUntil: null,
      reason: null,
      probeUntil: null,
      updatedAt: 1,
    };
    const other = await openDatabase(url);
    const lock = await other.client.transaction("write");
    await lock.execute("DELETE FROM cooldowns");
    await assert.rejects(saveCooldown(db, row), /locked|busy/i);
    await lock.rollback();
    other.close();
    await saveCooldown(db, row);
    // A batch needs a COMMIT, which is what a leftover busy statement would block.
    await db.client.batch(["SELECT 1"], "write");
    assert.deepEqual(await loadCooldowns(db), [row]);
  });
});
