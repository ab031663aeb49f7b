/**
 * Cells of a table whose time is mostly waiting (an idle window, a late header) run side by side
 * instead of one after another: on the 2-core machine the suite is bound by CPU, and a cell that
 * only waits leaves its share of it unused.
 */
import assert from "node:assert/strict";

/** `run` over `items`, at most `size` at once; the results in the items' order. */
export async function pool<T, R>(
  items: readonly T[],
  size: number,
  run: (item: T) => Promise<R>,
): Promise<R[]> {
  const out: R[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(size, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await run(items[i]!);
    }
  }));
  return out;
}

/**
 * One step per item, `atOnce` of them running at a time (all, unless told). Deno runs steps side
 * by side only with their sanitizers off; each still passes or fails on its own, and the test
 * fails if any did.
 */
export async function concurrentSteps<T>(
  t: Deno.TestContext,
  items: readonly T[],
  opts: { name: (item: T) => string; fn: (item: T) => Promise<void>; atOnce?: number },
): Promise<void> {
  const passed = await pool(items, opts.atOnce ?? items.length, (item) =>
    t.step({
      name: opts.name(item),
      fn: () => opts.fn(item),
      sanitizeOps: false,
      sanitizeResources: false,
      sanitizeExit: false,
    }));
  const failed = passed.filter((ok) => !ok).length;
  assert.equal(failed, 0, `${failed} of ${items.length} steps failed`);
}
