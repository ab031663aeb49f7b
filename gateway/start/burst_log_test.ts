/**
 * One log line per burst of a repeated event (gateway/start/burst_log.ts, docs/deploy.md
 * "Connection limits"). Its quiet period is real time (a log line's, which nothing waits on), so
 * these use milliseconds and bound nothing from above.
 */
import assert from "node:assert/strict";
import { eventually } from "../../tests/harness.ts";
import type { Logger } from "../runtime/logger.ts";
import { BurstLog } from "./burst_log.ts";

function logged() {
  const lines: { name: string; fields: Record<string, unknown> }[] = [];
  const log: Logger = { event: (name, fields) => void lines.push({ name, fields: fields ?? {} }) };
  return { lines, log };
}

Deno.test("burst log: a thousand hits in a burst are one line at its start and one at its end, with the count", async () => {
  const { lines, log } = logged();
  const burst = new BurstLog(log, {
    event: "accept.failed",
    endEvent: "accept.failed_burst_over",
    everyMs: 3_600_000,
    quietMs: 5,
    endFields: () => ({ cap: 4 }),
  });
  for (let i = 0; i < 1_000; i++) burst.hit({ error: "EMFILE" });
  assert.deepEqual(lines.map((l) => [l.name, l.fields]), [["accept.failed", { error: "EMFILE" }]]);
  await eventually(() => lines.length === 2, { what: "the end of the burst" });
  const end = lines[1]!;
  assert.equal(end.name, "accept.failed_burst_over");
  assert.equal(end.fields.count, 1_000);
  assert.equal(end.fields.cap, 4);
  assert.equal(typeof end.fields.ms, "number");
  // A hit after the quiet period starts a new burst, logged at once.
  burst.hit({ error: "EMFILE" });
  assert.equal(lines.length, 3);
  assert.equal(lines[2]?.name, "accept.failed");
  burst.close();
  assert.equal(lines[3]?.fields.count, 1);
});

Deno.test("burst log: while a burst lasts, a reminder with the hits since the last line at most once per everyMs", () => {
  const { lines, log } = logged();
  const burst = new BurstLog(log, {
    event: "conn.refused",
    endEvent: "conn.refused_over",
    everyMs: 0,
    quietMs: 3_600_000,
  });
  burst.hit();
  burst.hit();
  burst.hit();
  assert.deepEqual(lines.map((l) => l.fields.since_last_line), [undefined, 1, 1]);
  burst.close();
  assert.equal(lines.at(-1)?.name, "conn.refused_over");
  assert.equal(lines.at(-1)?.fields.count, 3);
  burst.close();
  assert.equal(lines.length, 4, "a closed log with no burst says nothing more");
});
