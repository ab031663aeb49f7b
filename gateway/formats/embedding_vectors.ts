/**
 * Embedding vectors on the wire: JSON arrays of numbers, or OpenAI's base64 of the vector's
 * float32 values in little-endian byte order (docs/providers.md "Embeddings"). The gateway
 * keeps every vector as a Float32Array: the precision every provider's models produce, at
 * four bytes a value.
 */
import { EMBED_LIMITS } from "./embeddings.ts";
import { badResponse } from "./upstream_error.ts";

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * An upstream's vector: a base64 string, an array of numbers, or the Float32Array an answer's
 * reader made of one (gateway/formats/vector_json.ts, which checked each value as it came).
 * Anything else, a value that is not a finite float32, or more values than the cap, is a bad
 * answer.
 */
export function vectorOf(value: unknown, opts: { upstream: string }): Float32Array {
  if (value instanceof Float32Array) {
    tooLong(value.length, opts);
    return value;
  }
  const vector = typeof value === "string" ? fromBase64(value, opts) : fromArray(value, opts);
  for (let i = 0; i < vector.length; i++) {
    if (!Number.isFinite(vector[i]!)) {
      throw badResponse(`upstream ${opts.upstream} answered an embedding value that is not finite`);
    }
  }
  return vector;
}

function fromArray(value: unknown, opts: { upstream: string }): Float32Array {
  if (!Array.isArray(value)) {
    throw badResponse(`upstream ${opts.upstream} answered an embedding that is not a vector`);
  }
  tooLong(value.length, opts);
  const vector = new Float32Array(value.length);
  for (let i = 0; i < value.length; i++) {
    const n = value[i];
    if (typeof n !== "number") {
      throw badResponse(
        `upstream ${opts.upstream} answered an embedding value that is not a number`,
      );
    }
    vector[i] = n;
  }
  return vector;
}

function fromBase64(text: string, opts: { upstream: string }): Float32Array {
  // Four characters of base64 carry three bytes: a longer text is over the cap however it decodes.
  tooLong(Math.floor((text.length * 3) / 16), opts);
  let bytes: Uint8Array;
  try {
    bytes = Uint8Array.fromBase64(text);
  } catch {
    throw badResponse(`upstream ${opts.upstream} answered an embedding that is not base64`);
  }
  if (bytes.byteLength % 4 !== 0) {
    throw badResponse(`upstream ${opts.upstream} answered a base64 embedding of partial floats`);
  }
  const count = bytes.byteLength / 4;
  if (LITTLE_ENDIAN) {
    // The decoded bytes are a buffer of their own: the vector is a view of it, not a copy.
    const own = bytes.byteOffset === 0 && bytes.buffer.byteLength === bytes.byteLength;
    const vector = new Float32Array(bytes.buffer, bytes.byteOffset, count);
    return own ? vector : vector.slice();
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return Float32Array.from({ length: count }, (_, i) => view.getFloat32(i * 4, true));
}

function tooLong(length: number, opts: { upstream: string }): void {
  if (length > EMBED_LIMITS.dimensions) {
    throw badResponse(
      `upstream ${opts.upstream} answered an embedding of over ${EMBED_LIMITS.dimensions} values`,
    );
  }
}

/** A vector as OpenAI's base64: its float32 values, little-endian. */
export function base64Of(vector: Float32Array): string {
  if (LITTLE_ENDIAN) {
    return new Uint8Array(vector.buffer, vector.byteOffset, vector.byteLength).toBase64();
  }
  const bytes = new Uint8Array(vector.length * 4);
  const view = new DataView(bytes.buffer);
  vector.forEach((v, i) => view.setFloat32(i * 4, v, true));
  return bytes.toBase64();
}

/**
 * A vector as a JSON array: each float32 value written exactly (the shortest text of the double
 * that holds it), so a client reads the very value the upstream sent, whatever its precision.
 * A shorter text of nine digits would round-trip in float32 but not in a client's doubles.
 */
export function floatsText(vector: Float32Array): string {
  const parts = new Array<string>(vector.length);
  for (let i = 0; i < vector.length; i++) parts[i] = String(vector[i]!);
  return `[${parts.join(",")}]`;
}

/**
 * Values written per step of an answer's body: a step of JSON numbers holds the serving thread
 * for about a millisecond (2 to 5 ms for 18,432 values on the 2-core test machine), base64 for
 * a tenth of that.
 */
const VALUES_PER_STEP = 4096;

/**
 * An answer's body written a few vectors at a time as the client reads it: `head`, each
 * vector's text (`item`) joined by commas, then `tail`. Nothing but the vectors is held
 * meanwhile, and the serving thread is given back between steps.
 */
export function vectorBody(
  vectors: readonly Float32Array[],
  opts: { head: string; item: (vector: Float32Array, index: number) => string; tail: string },
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let next = -1;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (next === -1) {
        next = 0;
        controller.enqueue(encoder.encode(opts.head));
        return;
      }
      if (next >= vectors.length) {
        controller.enqueue(encoder.encode(opts.tail));
        controller.close();
        return;
      }
      const parts: string[] = [];
      let values = 0;
      while (next < vectors.length && (values === 0 || values < VALUES_PER_STEP)) {
        const vector = vectors[next]!;
        parts.push((next > 0 ? "," : "") + opts.item(vector, next));
        values += vector.length;
        next++;
      }
      controller.enqueue(encoder.encode(parts.join("")));
    },
  }, { highWaterMark: 0 });
}
