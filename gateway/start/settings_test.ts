import assert from "node:assert/strict";
import { DB_THREAD_NICE, readSettings } from "./settings.ts";

const only = (name: string, value: string) => (n: string) => n === name ? value : undefined;

Deno.test("the history writer's nice value is 10 unless PULSEGATE_DB_THREAD_NICE names 0 to 19", () => {
  assert.equal(DB_THREAD_NICE, 10);
  assert.equal(readSettings(() => undefined).dbThreadNice, 10);
  assert.equal(readSettings(only("PULSEGATE_DB_THREAD_NICE", "0")).dbThreadNice, 0);
  assert.equal(readSettings(only("PULSEGATE_DB_THREAD_NICE", "19")).dbThreadNice, 19);
  for (const bad of ["-1", "20", "1.5", "ten"]) {
    assert.throws(
      () => readSettings(only("PULSEGATE_DB_THREAD_NICE", bad)),
      /PULSEGATE_DB_THREAD_NICE must be a whole number from 0 to 19/,
    );
  }
});
