import assert from "node:assert/strict";
import { checkUsage, isTokenCount, MAX_TOKEN_COUNT } from "./token_counts.ts";
import type { IrUsage } from "./ir.ts";

Deno.test("token counts: only a whole number from 0 to the cap is a count", () => {
  const table: [unknown, boolean][] = [
    [0, true],
    [1, true],
    [MAX_TOKEN_COUNT, true],
    [MAX_TOKEN_COUNT + 1, false],
    [-1, false],
    [-1e9, false],
    [2.5, false],
    [Infinity, false],
    [-Infinity, false],
    [NaN, false],
    [Number.MAX_SAFE_INTEGER, false],
    ["12", false],
    [null, false],
    [undefined, false],
  ];
  for (const [value, ok] of table) assert.equal(isTokenCount(value), ok, String(value));
});

Deno.test("token counts: a report loses each refused field, in place, and says which", () => {
  const usage: IrUsage = {
    inputTokens: Infinity,
    outputTokens: -1e9,
    cachedTokens: 3,
    reasoningTokens: 0.5,
    cacheWriteTokens: NaN,
    cacheWrite1hTokens: 2,
  };
  assert.deepEqual(checkUsage(usage), [
    "inputTokens",
    "outputTokens",
    "cacheWriteTokens",
    "reasoningTokens",
  ]);
  assert.deepEqual(usage, { cachedTokens: 3, cacheWrite1hTokens: 2 });
});

Deno.test("token counts: cache reads and writes are cut to the input, 1-hour writes to the writes", () => {
  const usage: IrUsage = {
    inputTokens: 100,
    cachedTokens: 80,
    cacheWriteTokens: 50,
    cacheWrite1hTokens: 40,
  };
  assert.deepEqual(checkUsage(usage), []);
  assert.deepEqual(usage, {
    inputTokens: 100,
    cachedTokens: 80,
    cacheWriteTokens: 20,
    cacheWrite1hTokens: 20,
  });
  const over: IrUsage = { inputTokens: 10, cachedTokens: 1_000 };
  checkUsage(over);
  assert.deepEqual(over, { inputTokens: 10, cachedTokens: 10 });
});
