/** /healthz polled from its own thread while a test loads the gateway (tests/health_poller_worker.ts). */

export interface HealthPolls {
  times: number[];
  failures: string[];
}

/** Polls /healthz from a worker thread until stopped; resolves once the first poll is in. */
export async function pollHealth(url: string): Promise<{ stop(): Promise<HealthPolls> }> {
  const worker = new Worker(new URL("./health_poller_worker.ts", import.meta.url), {
    type: "module",
  });
  const polling = Promise.withResolvers<void>();
  const done = Promise.withResolvers<HealthPolls>();
  worker.onmessage = (event: MessageEvent<HealthPolls | "polling">) =>
    event.data === "polling" ? polling.resolve() : done.resolve(event.data);
  worker.postMessage({ url });
  await polling.promise;
  return {
    async stop() {
      worker.postMessage("stop");
      const polls = await done.promise;
      worker.terminate();
      return polls;
    },
  };
}
