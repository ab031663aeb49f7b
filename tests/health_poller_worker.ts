/// <reference lib="deno.worker" />
/**
 * Polls a gateway's /healthz back to back on its own thread, so the times measure the gateway
 * and not the test's own event loop (which is busy sending the load). Started with `{ url }`;
 * posts "polling" after its first poll (so the load starts only then); told "stop", it posts
 * `{ times, failures }` and ends.
 */

let running = true;
const times: number[] = [];
const failures: string[] = [];

self.onmessage = (event: MessageEvent<{ url: string } | "stop">) => {
  if (event.data === "stop") {
    running = false;
    return;
  }
  void poll(event.data.url);
};

async function poll(url: string): Promise<void> {
  while (running) {
    const started = performance.now();
    try {
      const res = await fetch(`${url}/healthz`);
      await res.body?.cancel();
      if (res.status !== 200) failures.push(`status ${res.status}`);
    } catch (err) {
      failures.push(String(err));
    }
    times.push(performance.now() - started);
    if (times.length === 1) self.postMessage("polling");
    await new Promise((r) => setTimeout(r, 5));
  }
  self.postMessage({ times, failures });
  self.close();
}
