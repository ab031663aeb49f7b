import assert from "node:assert/strict";
import {
  addToSketch,
  MAX_SKETCH_ERROR,
  type Sketch,
  sketchBin,
  sketchPercentile,
  sketchValue,
} from "./first_content_sketch.ts";

Deno.test("a sketch bin reads back exact below 28 ms and within its bound above, to 2,000,000 ms", () => {
  let worst = 0;
  for (let ms = 0; ms <= 2_000_000; ms++) {
    const read = sketchValue(sketchBin(ms));
    if (ms < 28) assert.equal(read, ms);
    else worst = Math.max(worst, Math.abs(read - ms) / ms);
  }
  assert.ok(worst <= MAX_SKETCH_ERROR, `worst ${worst}`);
  assert.ok(worst > MAX_SKETCH_ERROR - 0.001, "the bound is the tight one");
});

Deno.test("percentiles of merged sketches: nearest rank, within the bound", () => {
  const values = Array.from({ length: 1_001 }, (_, i) => 5 + ((i * 7919) % 30_000));
  const parts: Sketch[] = [new Map(), new Map(), new Map()];
  values.forEach((v, i) => addToSketch(parts[i % 3]!, { bin: sketchBin(v), count: 1 }));
  const merged: Sketch = new Map();
  for (const part of parts) {
    for (const [bin, count] of part) addToSketch(merged, { bin, count });
  }
  const sorted = [...values].sort((a, b) => a - b);
  for (const p of [50, 95]) {
    const exact = sorted[Math.ceil((sorted.length * p) / 100) - 1]!;
    const read = sketchPercentile(merged, p)!;
    assert.ok(Math.abs(read - exact) <= exact * MAX_SKETCH_ERROR, `p${p}: ${read} vs ${exact}`);
  }
  assert.equal(sketchPercentile(new Map(), 50), null);
  const gone: Sketch = new Map([[3, 1]]);
  addToSketch(gone, { bin: 3, count: -1 });
  assert.equal(gone.size, 0, "a bin taken back to zero is dropped");
});
