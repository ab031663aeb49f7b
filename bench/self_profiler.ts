/**
 * A CPU profiler inside the profiled process, over `node:inspector`'s in-process session. Not the
 * `--inspect` server: with it attached the runtime reports every fetch to the inspector's network
 * panel, and tees and base64-encodes each response body for it (`getInspectorNetwork` in the
 * runtime's fetch), which in a gateway's profile showed as a fifth of fetch's time and inflated the
 * Web Streams share; an in-process session does not switch that on. The session's answers do not
 * hold the event loop open: it serves a process that has something else pending (the bench
 * gateway's servers); a script with nothing else pending exits in the middle of a call.
 */
import inspector from "node:inspector";
import type { SamplingHeapProfile } from "./alloc_profile.ts";

export class SelfProfiler {
  #session: inspector.Session | null = null;

  /** Connected on first use, so a gateway that is never profiled has no session. */
  #connected(): inspector.Session {
    if (!this.#session) {
      this.#session = new inspector.Session();
      this.#session.connect();
    }
    return this.#session;
  }

  #post<T>(method: string, params?: Record<string, unknown>): Promise<T> {
    const session = this.#connected();
    return new Promise((resolve, reject) =>
      session.post(method, params ?? {}, (err, result) => err ? reject(err) : resolve(result as T))
    );
  }

  async start(samplingUs: number): Promise<void> {
    await this.#post("Profiler.enable");
    await this.#post("Profiler.setSamplingInterval", { interval: samplingUs });
    await this.#post("Profiler.start");
  }

  /**
   * Starts V8's sampling heap profiler, one sample per `intervalBytes` allocated on average,
   * counting objects that minor and major GCs collect later too: what is allocated, not what
   * survives (bench/alloc_profile.ts).
   */
  async startAllocations(intervalBytes: number): Promise<void> {
    await this.#post("HeapProfiler.enable");
    await this.#post("HeapProfiler.startSampling", {
      samplingInterval: intervalBytes,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  }

  async stopAllocations(): Promise<{ profile: SamplingHeapProfile }> {
    const result = await this.#post<{ profile: SamplingHeapProfile }>("HeapProfiler.stopSampling");
    await this.#post("HeapProfiler.disable");
    return result;
  }

  /** Writes a heap snapshot (the `.heapsnapshot` JSON DevTools reads) to `path`. */
  async heapSnapshot(path: string): Promise<void> {
    const session = this.#connected();
    const file = await Deno.open(path, { write: true, create: true, truncate: true });
    const encoder = new TextEncoder();
    let writing = Promise.resolve();
    const onChunk = (message: { params: { chunk: string } }) => {
      const bytes = encoder.encode(message.params.chunk);
      writing = writing.then(async () => {
        for (let at = 0; at < bytes.length;) at += await file.write(bytes.subarray(at));
      });
    };
    session.on("HeapProfiler.addHeapSnapshotChunk", onChunk);
    try {
      await this.#post("HeapProfiler.takeHeapSnapshot", { reportProgress: false });
      await writing;
    } finally {
      session.off("HeapProfiler.addHeapSnapshotChunk", onChunk);
      file.close();
    }
  }

  /** The profile taken since `start`, as the protocol's `Profiler.stop` answers it. */
  async stop(): Promise<{ profile: unknown }> {
    const result = await this.#post<{ profile: unknown }>("Profiler.stop");
    await this.#post("Profiler.disable");
    return result;
  }
}
