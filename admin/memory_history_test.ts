import assert from "node:assert/strict";
import type { AttemptRecord } from "../db/records.ts";
import { memoryHistoryPage, memoryRequestDetail } from "./memory_history.ts";
import { attemptRecord, requestRecord } from "../tests/db_helpers.ts";

const rows = {
  requests: [
    requestRecord({ id: "a", startedAt: 100, route: "smart", state: "closed", outcome: "success" }),
    requestRecord({ id: "b", startedAt: 300, route: "smart", state: "closed", outcome: "error" }),
    requestRecord({ id: "c", startedAt: 300, route: "fast", state: "closed", outcome: "success" }),
    requestRecord({ id: "d", startedAt: 200, route: "smart", state: "open" }),
  ],
  attempts: [
    attemptRecord({ requestId: "b", hop: 2, upstream: "second" }),
    attemptRecord({ requestId: "b", hop: 1, upstream: "first" }),
  ] as AttemptRecord[],
};
const none = () => undefined;

Deno.test("memory history pages newest first, ties by id, with the database's keyset cursor", () => {
  const first = memoryHistoryPage(rows, { query: { limit: 2 }, live: none });
  assert.deepEqual(first.requests.map((r) => r.id), ["c", "b"]);
  assert.deepEqual(first.next, { startedAt: 300, id: "b" });
  const second = memoryHistoryPage(rows, {
    query: { limit: 2, before: first.next ?? undefined },
    live: none,
  });
  assert.deepEqual(second.requests.map((r) => r.id), ["d", "a"]);
  assert.equal(second.next, null);
});

Deno.test("memory history filters as the stored one does, and fills hops in order", () => {
  const page = memoryHistoryPage(rows, {
    query: { route: "smart", outcome: "error", since: 300, until: 301 },
    live: none,
  });
  assert.deepEqual(page.requests.map((r) => r.id), ["b"]);
  assert.deepEqual(page.requests[0]?.hops.map((h) => h.upstream), ["first", "second"]);
  const live = memoryHistoryPage(rows, {
    query: { state: "open" },
    live: (id) =>
      id === "d" ? requestRecord({ id: "d", startedAt: 200, route: "late" }) : undefined,
  });
  assert.equal(live.requests[0]?.route, "late", "a running request shows its live record");
  assert.equal(memoryRequestDetail(rows, { id: "b", live: none })?.attempts.length, 2);
  assert.equal(memoryRequestDetail(rows, { id: "zz", live: none }), null);
});
