/**
 * The size of the one buffer a streamed upstream body is read into. The
 * runtime's own reads allocate 64 KiB per read, which a held stream keeps
 * pending for as long as it is quiet and a busy one turns into garbage per
 * event (docs/benchmarks.md); an event is rarely over a few hundred bytes.
 */
export const READ_BUFFER_BYTES = 16 * 1024;

/**
 * Where a streamed body's buffer starts: a held stream (an upstream quiet before its first event)
 * keeps its pending read's buffer for as long as it is held, and thousands may be held at once.
 * A read that fills the buffer doubles it, up to READ_BUFFER_BYTES.
 */
export const FIRST_READ_BYTES = 1024;

/** What `Hop.reader` needs of a reader. */
export interface ChunkReader<T> {
  read(): Promise<ReadableStreamReadResult<T>>;
  cancel(reason?: unknown): Promise<void>;
  /** The caller holds no chunk any more: the buffer may serve another body. */
  release?(): void;
}

/**
 * Buffers of finished reads, by size, for the next body: a new buffer per request was a share
 * of a whole answer's CPU of its own (allocated, zeroed, tracked by the collector).
 */
const SPARE = new Map<number, ArrayBuffer[]>();
const SPARE_PER_SIZE = 32;

function bufferOf(bytes: number): ArrayBuffer {
  return SPARE.get(bytes)?.pop() ?? new ArrayBuffer(bytes);
}

function spare(buffer: ArrayBuffer): void {
  // A buffer a pending read still holds is detached here (byteLength 0): it is the body's.
  if (buffer.byteLength === 0) return;
  let list = SPARE.get(buffer.byteLength);
  if (!list) SPARE.set(buffer.byteLength, list = []);
  if (list.length < SPARE_PER_SIZE) list.push(buffer);
}

/**
 * Reads a byte body into one small buffer, reused from read to read, so each
 * chunk is valid only until the next read: for a caller that is done with a
 * chunk before it asks for the next (the SSE frame decoders, a whole answer's
 * text decoder). A body that is not a byte stream is read as it comes.
 * `release` once the caller is done with the last chunk.
 */
export function reusingReader<T>(
  body: ReadableStream<T>,
  opts: { firstBytes?: number } = {},
): ChunkReader<T> {
  let byob: ReadableStreamBYOBReader;
  try {
    byob = (body as unknown as ReadableStream<Uint8Array>).getReader({ mode: "byob" });
  } catch {
    // Not a byte stream (a test's fetch): read it with a default reader.
    return body.getReader();
  }
  let buffer = bufferOf(opts.firstBytes ?? READ_BUFFER_BYTES);
  return {
    async read() {
      const result = await byob.read(new Uint8Array(buffer));
      const value = result.value;
      if (value) {
        buffer = value.buffer as ArrayBuffer;
        // The previous chunk is the caller's until its next read, so a grown buffer is a new one.
        if (value.byteLength === buffer.byteLength && buffer.byteLength < READ_BUFFER_BYTES) {
          buffer = bufferOf(buffer.byteLength * 2);
        }
      }
      return result as ReadableStreamReadResult<T>;
    },
    cancel: (reason) => byob.cancel(reason),
    release: () => spare(buffer),
  };
}
