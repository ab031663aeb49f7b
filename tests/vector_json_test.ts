/**
 * An embeddings answer read a piece at a time (gateway/formats/vector_json.ts): the value
 * JSON.parse makes, wherever the text is cut, with arrays of numbers as float32 vectors; and
 * anything that is not JSON, a vector over the cap or a value not finite in float32 refused as
 * the upstream's bad answer as soon as it is read.
 */
import assert from "node:assert/strict";
import { VectorJson } from "../gateway/formats/vector_json.ts";
import { EMBED_LIMITS } from "../gateway/formats/embeddings.ts";

const opts = { upstream: "up", maxNodes: 1000 };

/** The text pushed cut at every `step` characters. */
function read(text: string, step: number, more: Partial<typeof opts> = {}): unknown {
  const parser = new VectorJson({ ...opts, ...more });
  for (let i = 0; i < text.length; i += step) parser.push(text.slice(i, i + step));
  return parser.end();
}

/** JSON.parse's value with every non-empty array of numbers as a Float32Array. */
function expected(text: string): unknown {
  return JSON.parse(
    text,
    (_key, value) =>
      Array.isArray(value) && value.length > 0 && value.every((v) => typeof v === "number")
        ? Float32Array.from(value)
        : value,
  );
}

const TEXTS = [
  '{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-0.25,1e-7]}],' +
  '"model":"m","usage":{"prompt_tokens":3,"total_tokens":3}}',
  '{\n  "embeddings": [\n    {\n      "values": [\n        0.0050051305,\n        -0.0063271034\n' +
  "      ]\n    }\n  ]\n}",
  '{"embeddings":{"float":[[1,2],[3,4]]},"texts":["a \\"quoted\\" \\u00e9\\ud83d\\ude00 \\n\\\\/"]}',
  '{"a":[],"b":[1,"x",[2]],"c":[[],{}],"d":true,"e":false,"f":null,"g":-0,"h":12345678901}',
  '{"__proto__":{"x":1},"k":"v"}',
  "[1.5e3, -2E-2, 0]",
  '"just a string"',
];

Deno.test("the value JSON.parse makes, wherever the text is cut, with vectors as float32", () => {
  for (const text of TEXTS) {
    for (const step of [1, 2, 3, 5, 7, 64, text.length]) {
      assert.deepEqual(read(text, step), expected(text), `${text} in pieces of ${step}`);
    }
  }
  const proto = read(TEXTS[4]!, 3) as Record<string, unknown>;
  assert.equal(Object.getPrototypeOf(proto), Object.prototype);
  assert.deepEqual(Object.keys(proto), ["__proto__", "k"]);
});

Deno.test("whatever is not JSON is the upstream's bad answer", () => {
  const bad = [
    "",
    "   ",
    "<html>oops</html>",
    '{"a":1',
    '{"a":1}}',
    '{"a" 1}',
    '{"a":1,}',
    "[1,,2]",
    "[1 2]",
    '{"a":tru}',
    '{"a":nul}',
    '{"a":"b\\x"}',
    '{"a":"b\\u12G4"}',
    '{"a":"unterminated',
    '{"a":"tab\tinside"}',
    "[1-2]",
    "[-]",
    "{1:2}",
    "{} {}",
    '{"a":[1]]',
  ];
  for (const text of bad) {
    for (const step of [1, 4, Math.max(1, text.length)]) {
      assert.throws(() => read(text, step), { code: "gw.upstream.bad_response" }, text);
    }
  }
});

Deno.test("a vector is refused at its first value over the cap, not after the whole array", () => {
  const parser = new VectorJson(opts);
  parser.push('{"data":[{"embedding":[');
  parser.push("1,".repeat(EMBED_LIMITS.dimensions));
  assert.throws(() => parser.push("1,"), {
    code: "gw.upstream.bad_response",
    message: /over 8192 values/,
  });
  // At the cap itself, a vector.
  const full = `[${Array(EMBED_LIMITS.dimensions).fill(1).join(",")}]`;
  assert.equal((read(full, 1000) as Float32Array).length, EMBED_LIMITS.dimensions);
});

Deno.test("a value not finite in float32, and an answer of too many values, are refused", () => {
  assert.throws(() => read("[1e39]", 2), { message: /not finite/ });
  assert.throws(() => read("[0.5,-1e300]", 3), { message: /not finite/ });
  const empties = `[${Array(2000).fill("[]").join(",")}]`;
  assert.throws(() => read(empties, 100), { message: /more than 1000 values/ });
  const deep = "[".repeat(40) + "]".repeat(40);
  assert.throws(() => read(deep, 5), { message: /nested too deep/ });
});

Deno.test("revive replaces an object member's value as it completes", () => {
  const seen: string[] = [];
  const parser = new VectorJson({
    ...opts,
    revive: (key, value) => {
      seen.push(key);
      return key === "embedding" ? `<${value}>` : value;
    },
  });
  parser.push('{"data":[{"index":0,"embedding":"AAA');
  parser.push('A"}],"n":1}');
  assert.deepEqual(parser.end(), { data: [{ index: 0, embedding: "<AAAA>" }], n: 1 });
  assert.deepEqual(seen, ["index", "embedding", "data", "n"]);
});
