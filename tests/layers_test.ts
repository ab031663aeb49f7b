import assert from "node:assert/strict";
import { layerOf, layerViolations } from "../tools/layers.ts";

Deno.test("every import runs downward through the layers of docs/architecture.md", async () => {
  assert.deepEqual(await layerViolations(new URL("../", import.meta.url)), []);
});

Deno.test("the layer check sees an upward import, and a gateway file in no layer", async () => {
  const root = await Deno.makeTempDir({ prefix: "pulsegate-layers-" });
  try {
    await Deno.mkdir(`${root}/gateway/runtime`, { recursive: true });
    await Deno.mkdir(`${root}/gateway/forward`, { recursive: true });
    await Deno.mkdir(`${root}/gateway/stray`, { recursive: true });
    await Deno.writeTextFile(`${root}/gateway/forward/hop.ts`, "export const hop = 1;\n");
    await Deno.writeTextFile(
      `${root}/gateway/runtime/clock.ts`,
      'import { hop } from "../forward/hop.ts";\nexport const clock = hop;\n',
    );
    await Deno.writeTextFile(`${root}/gateway/stray/odd.ts`, "export const odd = 1;\n");
    const found = await layerViolations(new URL(`file://${root}/`));
    assert.deepEqual(found, [
      "gateway/runtime/clock.ts -> gateway/forward/hop.ts (gateway/runtime/ -> gateway/forward/)",
      "gateway/stray/odd.ts is in no layer",
    ]);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
  assert.ok(layerOf("gateway/formats/anthropic/mod.ts") < layerOf("gateway/forward/hop.ts"));
  assert.equal(layerOf("tests/layers_test.ts"), -1);
});
