import assert from "node:assert/strict";
import { clockBypasses } from "../tools/clock_check.ts";

Deno.test("no file in gateway/, admin/ or db/ waits or reads the time except through the clock", async () => {
  assert.deepEqual(await clockBypasses(new URL("../", import.meta.url)), []);
});

Deno.test("the clock check sees a raw timer, a raw reading of the time and scale arithmetic; tests and the clock itself are free", async () => {
  const root = await Deno.makeTempDir({ prefix: "pulsegate-clock-" });
  try {
    await Deno.mkdir(`${root}/gateway/runtime`, { recursive: true });
    await Deno.mkdir(`${root}/gateway/forward`, { recursive: true });
    await Deno.mkdir(`${root}/db`, { recursive: true });
    await Deno.mkdir(`${root}/admin`, { recursive: true });
    await Deno.writeTextFile(`${root}/gateway/runtime/clock.ts`, "setTimeout(() => {}, 1);\n");
    await Deno.writeTextFile(
      `${root}/gateway/forward/hop.ts`,
      [
        "// setTimeout(f, 1) in a comment is no timer",
        "const t = setTimeout(() => {}, 1);",
        "const at = Date.now();",
        "const ms = 5 * clock.scale;",
      ].join("\n"),
    );
    await Deno.writeTextFile(`${root}/db/history_writer.ts`, "const now = new Date();\n");
    await Deno.writeTextFile(`${root}/admin/live_events.ts`, "const t = performance.now();\n");
    await Deno.writeTextFile(`${root}/gateway/forward/hop_test.ts`, "setTimeout(() => {}, 1);\n");
    const found = await clockBypasses(new URL(`file://${root}/`));
    assert.deepEqual(found.map((line) => line.split(": ").slice(0, 2).join(": ")).sort(), [
      "admin/live_events.ts:1: a raw reading of the time",
      "db/history_writer.ts:1: a raw reading of the time",
      "gateway/forward/hop.ts:2: a raw timer",
      "gateway/forward/hop.ts:3: a raw reading of the time",
      "gateway/forward/hop.ts:4: time-scale arithmetic",
    ]);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
