/**
 * An answer whose body the gateway holds until the client has taken it: `release` runs once,
 * when the body has been read to its end, failed, or been cancelled (the client left). An
 * embeddings answer holds its key's place in progress and its share of the process's vector
 * budget this way (docs/security.md "Request bodies and per-key concurrency"): its vectors, up to
 * 24 MiB, stay in memory while a client reads slowly, so a key's `max_in_flight` and the budget
 * must bound how many of them it can hold.
 */
export function releasedWhenTaken(res: Response, release: () => void): Response {
  const source = res.body;
  if (!source) {
    release();
    return res;
  }
  let released = false;
  const done = () => {
    if (released) return;
    released = true;
    release();
  };
  const reader = source.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done: ended, value } = await reader.read();
        if (ended) {
          controller.close();
          done();
        } else controller.enqueue(value);
      } catch (err) {
        controller.error(err);
        done();
      }
    },
    cancel(reason) {
      done();
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
  return new Response(body, { status: res.status, headers: res.headers });
}
