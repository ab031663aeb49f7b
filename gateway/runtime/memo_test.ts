import assert from "node:assert/strict";
import { boundedMemo, onePer } from "./memo.ts";

Deno.test("boundedMemo makes each answer once, keeps null answers, and starts over when full", () => {
  const made: string[] = [];
  const name = boundedMemo((key: string) => {
    made.push(key);
    return key === "bad" ? null : key.toUpperCase();
  }, { max: 2 });
  assert.equal(name("a"), "A");
  assert.equal(name("bad"), null);
  assert.equal(name("a"), "A");
  assert.equal(name("bad"), null);
  assert.deepEqual(made, ["a", "bad"]);
  // A third key fills past the bound: the cache starts over, so "a" is made again.
  assert.equal(name("c"), "C");
  assert.equal(name("a"), "A");
  assert.deepEqual(made, ["a", "bad", "c", "a"]);
});

Deno.test("onePer makes one value per object", () => {
  let made = 0;
  const of = onePer((o: { n: number }) => ({ twice: o.n * 2, serial: ++made }));
  const a = { n: 1 };
  const b = { n: 1 };
  assert.equal(of(a), of(a));
  assert.notEqual(of(a), of(b));
  assert.equal(made, 2);
});
