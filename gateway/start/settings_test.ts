import assert from "node:assert/strict";
import { HISTORY_WRITER_NICE, readSettings } from "./settings.ts";

const only = (name: string, value: string) => (n: string) => n === name ? value : undefined;

Deno.test("the history writer's nice value is 10 unless PULSEGATE_HISTORY_WRITER_NICE names 0 to 19", () => {
  assert.equal(HISTORY_WRITER_NICE, 10);
  assert.equal(readSettings(() => undefined).historyWriterNice, 10);
  assert.equal(readSettings(only("PULSEGATE_HISTORY_WRITER_NICE", "0")).historyWriterNice, 0);
  assert.equal(readSettings(only("PULSEGATE_HISTORY_WRITER_NICE", "19")).historyWriterNice, 19);
  for (const bad of ["-1", "20", "1.5", "ten"]) {
    assert.throws(
      () => readSettings(only("PULSEGATE_HISTORY_WRITER_NICE", bad)),
      /PULSEGATE_HISTORY_WRITER_NICE must be a whole number from 0 to 19/,
    );
  }
});
