/**
 * The size of the one buffer a streamed upstream body is read into. The
 * runtime's own reads allocate 64 KiB per read, which a held stream keeps
 * pending for as long as it is quiet and a busy one turns into garbage per
 * event (docs/benchmarks.md); an event is rarely over a few hundred bytes.
 */
export const READ_BUFFER_BYTES = 16 * 1024;

/**
 * Reads a byte body into one small buffer, reused from read to read, so each
 * chunk is valid only until the next is asked for: for a caller that decodes
 * a chunk before taking the next (the SSE frame decoders). A body that is
 * not a byte stream is read as it comes. As with `Hop.read`, a stop cancels
 * the read itself (not only the fetch) and the read throws the stop's reason.
 */
export async function* readReusing(
  body: ReadableStream<Uint8Array>,
  signal: AbortSignal,
): AsyncGenerator<Uint8Array> {
  let byob: ReadableStreamBYOBReader | null = null;
  try {
    byob = body.getReader({ mode: "byob" });
  } catch {
    // Not a byte stream (a test's fetch): read it with a default reader.
  }
  const reader = byob ?? body.getReader();
  const cancel = () => void reader.cancel(signal.reason).catch(() => {});
  signal.addEventListener("abort", cancel, { once: true });
  let buffer = new ArrayBuffer(READ_BUFFER_BYTES);
  try {
    for (;;) {
      if (signal.aborted) throw signal.reason;
      const { done, value } = byob
        ? await byob.read(new Uint8Array(buffer))
        : await (reader as ReadableStreamDefaultReader<Uint8Array>).read();
      if (signal.aborted) throw signal.reason;
      if (done) return;
      yield value;
      if (byob) buffer = value.buffer as ArrayBuffer;
    }
  } finally {
    signal.removeEventListener("abort", cancel);
    cancel();
  }
}
