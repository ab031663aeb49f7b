/**
 * The size of the one buffer a streamed upstream body is read into. The
 * runtime's own reads allocate 64 KiB per read, which a held stream keeps
 * pending for as long as it is quiet and a busy one turns into garbage per
 * event (docs/benchmarks.md); an event is rarely over a few hundred bytes.
 */
export const READ_BUFFER_BYTES = 16 * 1024;

/** What `Hop.read` needs of a reader. */
export interface ChunkReader<T> {
  read(): Promise<ReadableStreamReadResult<T>>;
  cancel(reason?: unknown): Promise<void>;
}

/**
 * Reads a byte body into one small buffer, reused from read to read, so each
 * chunk is valid only until the next read: for a caller that is done with a
 * chunk before it asks for the next (the SSE frame decoders, a whole answer's
 * text decoder). A body that is not a byte stream is read as it comes.
 */
export function reusingReader<T>(body: ReadableStream<T>): ChunkReader<T> {
  let byob: ReadableStreamBYOBReader;
  try {
    byob = (body as unknown as ReadableStream<Uint8Array>).getReader({ mode: "byob" });
  } catch {
    // Not a byte stream (a test's fetch): read it with a default reader.
    return body.getReader();
  }
  let buffer = new ArrayBuffer(READ_BUFFER_BYTES);
  return {
    async read() {
      const result = await byob.read(new Uint8Array(buffer));
      if (result.value) buffer = result.value.buffer as ArrayBuffer;
      return result as ReadableStreamReadResult<T>;
    },
    cancel: (reason) => byob.cancel(reason),
  };
}
