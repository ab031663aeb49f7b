/**
 * An embeddings answer's JSON, read a piece at a time as its bytes arrive (docs/providers.md
 * "Embeddings", docs/security.md "Hostile input"). `JSON.parse` needs the whole text first and
 * then holds the serving thread for as long as it takes: a 30 MiB array from a hostile upstream
 * was held as text, parsed into 15 million numbers and only then found to be over the cap. Here
 * every array of numbers becomes a Float32Array as it is read, refused at its 8,193rd value, and
 * the caller gives the serving thread back between pieces.
 *
 * What it makes is what `JSON.parse` would, but for two things: a non-empty array of numbers
 * only is a Float32Array (an embedding's values, kept at the precision the models produce), and
 * `revive` may replace an object member's value as it completes (a base64 vector decoded there).
 */
import { EMBED_LIMITS } from "./embeddings.ts";
import { badResponse } from "./upstream_error.ts";

export interface VectorJsonOpts {
  /** The upstream's id, for the errors. */
  upstream: string;
  /**
   * Most values outside vectors (members, items, containers): what an answer of its inputs
   * holds, so a hostile answer of millions of empty arrays is refused, not built.
   */
  maxNodes: number;
  /** Replaces an object member's value as it completes; answers the value to keep. */
  revive?: (key: string, value: unknown) => unknown;
}

/** Deeper than any provider's answer (four levels): a deeper one is no answer. */
const MAX_DEPTH = 16;

type ObjectExpect = "key_or_end" | "key" | "colon" | "value" | "comma_or_end";
type ArrayExpect = "value_or_end" | "value" | "comma_or_end";

interface ObjectFrame {
  object: true;
  value: Record<string, unknown>;
  key: string;
  expect: ObjectExpect;
}

interface ArrayFrame {
  object: false;
  /** Its items, once one is not a number; null while every item so far is (kept in `numbers`). */
  items: unknown[] | null;
  /** How many numbers `numbers` holds for it. */
  count: number;
  expect: ArrayExpect;
}

type Frame = ObjectFrame | ArrayFrame;

const QUOTE = 34;
const ESCAPES: Record<string, string> = {
  '"': '"',
  "\\": "\\",
  "/": "/",
  b: "\b",
  f: "\f",
  n: "\n",
  r: "\r",
  t: "\t",
};
/** JSON's strings hold no raw control character (RFC 8259, section 7). */
// deno-lint-ignore no-control-regex
const CONTROL = /[\u0000-\u001f]/;
const HEX4 = /^[0-9a-fA-F]{4}$/;
/** Numbers and what separates them, nothing else: a run of one vector's values. */
const NUMBER_RUN = /^[-+.eE0-9,\s]*$/;

/** A character that may be part of a JSON number: digits, sign, point, exponent. */
function inNumber(c: number): boolean {
  return (c >= 48 && c <= 57) || c === 45 || c === 43 || c === 46 || c === 101 || c === 69;
}

function isSpace(c: number): boolean {
  return c === 32 || c === 10 || c === 13 || c === 9;
}

/**
 * Reads one JSON text pushed in pieces of any size, cut anywhere (inside a number, a string, an
 * escape). `push` as text arrives, then `end` for the value. Any piece that makes the text
 * something other than JSON, an array of numbers longer than a vector may be, a value that is
 * not finite in float32, or more values than `maxNodes` throws the upstream's bad answer at once.
 */
export class VectorJson {
  /** Some non-whitespace arrived: the answer is not empty. */
  seen = false;
  readonly #opts: VectorJsonOpts;
  readonly #stack: Frame[] = [];
  /** The values of the innermost open array while they are all numbers (one array at a time). */
  readonly #numbers = new Float64Array(EMBED_LIMITS.dimensions);
  /** The tail of the last piece that may be a token cut in two: read again before the next. */
  #carry = "";
  /** Inside a string: its text so far. */
  #string: string[] | null = null;
  /** The string being read is a member's key. */
  #key = false;
  #nodes = 0;
  #done = false;
  #result: unknown = undefined;

  constructor(opts: VectorJsonOpts) {
    this.#opts = opts;
  }

  push(piece: string): void {
    const text = this.#carry === "" ? piece : this.#carry + piece;
    this.#carry = "";
    this.#read(text, false);
  }

  /** The whole answer's value; a text that ended early is a bad answer. */
  end(): unknown {
    const text = this.#carry;
    this.#carry = "";
    if (text !== "") this.#read(text, true);
    if (!this.#done || this.#string !== null) throw this.#bad("answered embeddings cut short");
    return this.#result;
  }

  #bad(what: string): Error {
    return badResponse(`upstream ${this.#opts.upstream} ${what}`);
  }

  #read(text: string, final: boolean): void {
    const n = text.length;
    let i = 0;
    while (i < n) {
      if (this.#string !== null) {
        i = this.#stringPart(text, i, final);
        if (i < 0) return;
        continue;
      }
      const c = text.charCodeAt(i);
      if (isSpace(c)) {
        i++;
        continue;
      }
      this.seen = true;
      if (c === QUOTE) {
        this.#expectString();
        this.#string = [];
        i++;
      } else if (inNumber(c)) {
        const run = this.#numberRun(text, i);
        if (run > i) {
          i = run;
          continue;
        }
        let j = i + 1;
        while (j < n && inNumber(text.charCodeAt(j))) j++;
        if (j === n && !final) {
          this.#carry = text.slice(i);
          return;
        }
        const value = Number(text.slice(i, j));
        if (Number.isNaN(value)) throw this.#bad("answered embeddings that are not JSON");
        this.#number(value);
        i = j;
      } else if (c === 116 || c === 102 || c === 110) {
        // true, false, null
        const word = c === 116 ? "true" : c === 102 ? "false" : "null";
        if (n - i < word.length && !final) {
          this.#carry = text.slice(i);
          return;
        }
        if (!text.startsWith(word, i)) throw this.#bad("answered embeddings that are not JSON");
        this.#beforeValue(false);
        this.#place(c === 116 ? true : c === 102 ? false : null);
        i += word.length;
      } else {
        this.#structural(c);
        i++;
      }
    }
  }

  /**
   * The numbers of a vector from `i` up to its end or the piece's last comma, read by the
   * runtime's own parser (several times faster than one at a time); answers where reading goes on,
   * or `i` when there is no such run (the numbers are then read one at a time).
   */
  #numberRun(text: string, i: number): number {
    const top = this.#stack.at(-1);
    if (!top || top.object || top.items !== null || top.expect === "comma_or_end") return i;
    const close = text.indexOf("]", i);
    const end = close === -1 ? text.lastIndexOf(",") : close;
    if (end <= i) return i;
    const run = text.slice(i, end);
    if (!NUMBER_RUN.test(run)) return i;
    let values: number[];
    try {
      values = JSON.parse(`[${run}]`);
    } catch {
      throw this.#bad("answered embeddings that are not JSON");
    }
    if (top.count + values.length > EMBED_LIMITS.dimensions) {
      throw this.#bad(`answered an embedding of over ${EMBED_LIMITS.dimensions} values`);
    }
    this.#numbers.set(values, top.count);
    top.count += values.length;
    top.expect = "comma_or_end";
    return end;
  }

  /** Reads a string from `i`; answers where reading goes on, or -1 when the text ended in it. */
  #stringPart(text: string, i: number, final: boolean): number {
    const parts = this.#string!;
    for (;;) {
      const quote = text.indexOf('"', i);
      const stop = quote === -1 ? text.length : quote;
      // Looked for up to the quote only: a piece of many short strings is not rescanned per string.
      const chars = text.slice(i, stop);
      const escapeAt = chars.indexOf("\\");
      if (escapeAt === -1) {
        this.#chars(parts, chars);
        if (quote === -1) return -1;
        this.#string = null;
        this.#stringRead(parts.length === 1 ? parts[0]! : parts.join(""));
        return quote + 1;
      }
      const slash = i + escapeAt;
      this.#chars(parts, chars.slice(0, escapeAt));
      const escape = text[slash + 1];
      const long = escape === "u";
      if (slash + (long ? 6 : 2) > text.length) {
        if (final) throw this.#bad("answered embeddings cut short");
        this.#carry = text.slice(slash);
        return -1;
      }
      if (long) {
        const hex = text.slice(slash + 2, slash + 6);
        if (!HEX4.test(hex)) throw this.#bad("answered embeddings that are not JSON");
        parts.push(String.fromCharCode(parseInt(hex, 16)));
        i = slash + 6;
      } else {
        const char = ESCAPES[escape!];
        if (char === undefined) throw this.#bad("answered embeddings that are not JSON");
        parts.push(char);
        i = slash + 2;
      }
    }
  }

  #chars(parts: string[], chars: string): void {
    if (chars === "") return;
    if (CONTROL.test(chars)) throw this.#bad("answered embeddings that are not JSON");
    parts.push(chars);
  }

  /** A string starts: a member's key, or a value where one may come. */
  #expectString(): void {
    const top = this.#stack.at(-1);
    this.#key = top?.object === true && (top.expect === "key" || top.expect === "key_or_end");
    if (!this.#key) this.#beforeValue(false);
  }

  /** A string read: the key of the member to come, or a value. */
  #stringRead(text: string): void {
    const top = this.#stack.at(-1);
    if (this.#key && top?.object) {
      top.key = text;
      top.expect = "colon";
      return;
    }
    this.#place(text);
  }

  /** A value is about to be read into the innermost container (or be the whole answer). */
  #beforeValue(isNumber: boolean): void {
    const top = this.#stack.at(-1);
    if (!top) {
      if (this.#done) throw this.#bad("answered embeddings that are not JSON");
      return;
    }
    const ok = top.object ? top.expect === "value" : top.expect !== "comma_or_end";
    if (!ok) throw this.#bad("answered embeddings that are not JSON");
    // An array of numbers so far that gets anything else is an ordinary array from here.
    if (!top.object && top.items === null && !isNumber && top.count > 0) {
      top.items = Array.from(this.#numbers.subarray(0, top.count));
      this.#counted(top.count);
    }
  }

  #number(value: number): void {
    this.#beforeValue(true);
    const top = this.#stack.at(-1);
    if (top && !top.object && top.items === null) {
      if (top.count === EMBED_LIMITS.dimensions) {
        throw this.#bad(`answered an embedding of over ${EMBED_LIMITS.dimensions} values`);
      }
      this.#numbers[top.count++] = value;
      top.expect = "comma_or_end";
      return;
    }
    this.#place(value);
  }

  /** A whole value read (its place was checked as it began): into its container, or the answer. */
  #place(value: unknown): void {
    const top = this.#stack.at(-1);
    if (!top) {
      this.#result = value;
      this.#done = true;
      return;
    }
    this.#counted(1);
    if (top.object) {
      const kept = this.#opts.revive ? this.#opts.revive(top.key, value) : value;
      // As JSON.parse makes it: an own member, even one named __proto__.
      if (top.key === "__proto__") {
        Object.defineProperty(top.value, top.key, {
          value: kept,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      } else top.value[top.key] = kept;
    } else {
      (top.items ??= []).push(value);
    }
    top.expect = "comma_or_end";
  }

  #counted(nodes: number): void {
    this.#nodes += nodes;
    if (this.#nodes > this.#opts.maxNodes) {
      throw this.#bad(`answered more than ${this.#opts.maxNodes} values besides its vectors`);
    }
  }

  #structural(c: number): void {
    const top = this.#stack.at(-1);
    switch (c) {
      case 123: // {
      case 91: // [
        this.#beforeValue(false);
        if (this.#stack.length === MAX_DEPTH) {
          throw this.#bad("answered embeddings nested too deep");
        }
        this.#stack.push(
          c === 123
            ? { object: true, value: {}, key: "", expect: "key_or_end" }
            : { object: false, items: null, count: 0, expect: "value_or_end" },
        );
        return;
      case 125: // }
        if (!top?.object || (top.expect !== "key_or_end" && top.expect !== "comma_or_end")) break;
        this.#stack.pop();
        this.#place(top.value);
        return;
      case 93: // ]
        if (!top || top.object || top.expect === "value") break;
        this.#stack.pop();
        this.#place(this.#closed(top));
        return;
      case 58: // :
        if (!top?.object || top.expect !== "colon") break;
        top.expect = "value";
        return;
      case 44: // ,
        if (!top || top.expect !== "comma_or_end") break;
        top.expect = top.object ? "key" : "value";
        return;
    }
    throw this.#bad("answered embeddings that are not JSON");
  }

  /** A closed array: its items, or its numbers as float32 (finite, as every vector must be). */
  #closed(frame: ArrayFrame): unknown {
    if (frame.items !== null) return frame.items;
    if (frame.count === 0) return [];
    const vector = Float32Array.from(this.#numbers.subarray(0, frame.count));
    for (let i = 0; i < vector.length; i++) {
      if (!Number.isFinite(vector[i]!)) {
        throw this.#bad("answered an embedding value that is not finite");
      }
    }
    return vector;
  }
}
