/**
 * The store of which key each continuation id or token was handed to
 * (gateway/route/continuation_owners.ts, docs/design.md "Continuation ids"): its
 * bounds in memory and in the database, first key wins, digests only, and a database that
 * cannot answer.
 */
import assert from "node:assert/strict";
import type { Db } from "../../db/client.ts";
import {
  bindContinuationOwners,
  countContinuationOwners,
  findContinuationOwner,
} from "../../db/continuation_owners_store.ts";
import { ContinuationOwners, digestOf, MAX_CONTINUATION_CHARS } from "./continuation_owners.ts";
import type { Clock } from "../runtime/clock.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import { createLogger } from "../runtime/logger.ts";
import { withTempDb } from "../../tests/db_helpers.ts";
import { eventually } from "../../tests/harness.ts";

/** A clock the test moves: `at.now` is the time. */
function movableClock(at: { now: number }): Clock {
  return {
    now: () => at.now,
    after: () => () => {},
    sleep: () => Promise.resolve(),
    deadline: (ms, from = at.now) => from + ms,
    elapsed: (since, until = at.now) => until - since,
  };
}

Deno.test("continuation owners are bounded: per key and by age in the database, by count in memory; the first key keeps a handle; only digests are kept", async () => {
  await withTempDb(async ({ db }) => {
    const at = { now: 1_000_000 };
    const bounds = { memoryBindings: 3, storedPerKey: 5, pruneEvery: 4, retainMs: 60_000 };
    const log = createLogger({ quiet: true });
    const owners = new ContinuationOwners({ db, clock: movableClock(at), log, ...bounds });
    // A process that has seen nothing: every answer comes from the database.
    const cold = () => new ContinuationOwners({ db, clock: movableClock(at), log, ...bounds });
    for (let i = 1; i <= 8; i++) {
      at.now++;
      owners.bind("one", [`tok-${i}`]);
    }
    // Eight writes for key one: the eighth pruned it to its five most recently used.
    await eventually(async () => (await countContinuationOwners(db, "one")) === 5);
    assert.equal(await owners.ownerOf("tok-8"), "one");
    // Out of memory (three kept) but in the database: found there.
    assert.equal(await owners.ownerOf("tok-4"), "one");
    // Pruned: gone everywhere.
    assert.equal(await owners.ownerOf("tok-1"), undefined);
    assert.equal(await cold().ownerOf("tok-1"), undefined);

    // The first key keeps a handle another key's answer names again.
    owners.bind("two", ["tok-8", "theirs"]);
    await eventually(async () => (await countContinuationOwners(db, "two")) === 1);
    assert.equal(await owners.ownerOf("tok-8"), "one");
    assert.equal(await cold().ownerOf("tok-8"), "one");
    assert.equal(await cold().ownerOf("theirs"), "two");
    // So does the database, for a process that never saw the first binding.
    await bindContinuationOwners(db, {
      keyId: "two",
      usedAt: at.now,
      digests: [digestOf("tok-8")],
    });
    assert.deepEqual(await findContinuationOwner(db, digestOf("tok-8")), {
      keyId: "one",
      usedAt: 1_000_008,
    });

    // What the table holds is digests: no token can be read back from it.
    const kept = await db.client.execute("SELECT digest FROM continuation_owners");
    const digests = kept.rows.map((r) => String(r.digest));
    assert.ok(digests.includes(digestOf("tok-8")));
    assert.ok(digests.every((d) => d.length === 43 && !d.startsWith("tok-")));

    // An over-long handle is neither kept nor looked up.
    const long = "x".repeat(MAX_CONTINUATION_CHARS + 1);
    owners.bind("one", [long]);
    assert.equal(await owners.ownerOf(long), undefined);

    // Unused for longer than the retention: forgotten in memory, skipped in the database, and
    // pruned by the next prune.
    at.now += 60_001;
    assert.equal(await owners.ownerOf("tok-8"), undefined);
    assert.equal(await cold().ownerOf("theirs"), undefined);
    for (let i = 0; i < 4; i++) owners.bind("three", [`new-${i}`]);
    await eventually(async () => (await countContinuationOwners(db)) === 4, { what: "aged out" });
    assert.equal(await countContinuationOwners(db, "three"), 4);
  });
});

Deno.test("a lookup the database cannot answer is a 503, not a guess", async () => {
  const down = {
    client: {
      protocol: "file",
      closed: false,
      execute: () => Promise.reject(new Error("database is locked")),
    },
  } as unknown as Db;
  const owners = new ContinuationOwners({
    db: down,
    clock: movableClock({ now: 1 }),
    log: createLogger({ quiet: true }),
  });
  await assert.rejects(owners.ownerOf("tok-1"), (err: unknown) => {
    assert.ok(err instanceof GatewayError);
    assert.equal(err.code, "gw.gateway.continuation_lookup_failed");
    assert.equal(err.status, 503);
    return true;
  });
});
