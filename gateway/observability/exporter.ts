import type { AttemptRecord, RequestRecord } from "../../db/records.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";
import type { Destination } from "./destination_schema.ts";
import { otlpLogs } from "./otlp.ts";
import { otlpTraces } from "./otlp_traces.ts";

/** A request as it finished, with its chain of hops. */
export interface FinishedRecord {
  request: RequestRecord;
  attempts: AttemptRecord[];
}

const FLUSH_EVERY_MS = 1_000;
const BATCH = 100;
const MAX_QUEUED = 10_000;
const RETRY_CAP_MS = 30_000;

const BODIES: Record<Destination["kind"], (batch: FinishedRecord[]) => unknown> = {
  webhook: (records) => ({ records }),
  otlp: otlpLogs,
  "otlp-traces": otlpTraces,
};

interface Queue {
  destination: Destination;
  records: FinishedRecord[];
  dropped: number;
  failures: number;
  sending: boolean;
  retryAt: number;
}

/**
 * Sends finished request records to each enabled destination, in batches,
 * off the request path. Each destination has its own queue, so one slow or
 * broken receiver never holds back another, and a record pushed while a
 * destination is disabled is never sent to it.
 */
export class Exporter {
  #queues = new Map<string, Queue>();
  /** Whether an enabled traces destination is among them: asked by every request as it arrives. */
  #tracing = false;
  /** Whether any destination is enabled: asked by every request as it ends. */
  #receiving = false;
  #cancel: (() => void) | null = null;

  constructor(
    private opts: {
      clock: Clock;
      env: (name: string) => string | undefined;
      fetch: typeof fetch;
      log: Logger;
    },
  ) {}

  setDestinations(list: Destination[]): void {
    const next = new Map<string, Queue>();
    for (const destination of list) {
      const old = this.#queues.get(destination.id);
      next.set(
        destination.id,
        old ? { ...old, destination } : {
          destination,
          records: [],
          dropped: 0,
          failures: 0,
          sending: false,
          retryAt: 0,
        },
      );
    }
    this.#queues = next;
    this.#tracing = list.some((d) => d.enabled && d.kind === "otlp-traces");
    this.#receiving = list.some((d) => d.enabled);
  }

  /** Whether some traces destination is on: requests starting now record their spans. */
  tracing(): boolean {
    return this.#tracing;
  }

  /** Whether a record pushed now goes anywhere: with no destination enabled, none is made. */
  receiving(): boolean {
    return this.#receiving;
  }

  push(record: FinishedRecord): void {
    let any = false;
    for (const q of this.#queues.values()) {
      if (!q.destination.enabled) continue;
      // A request that started with tracing off, or that its client did not sample, has no spans.
      if (q.destination.kind === "otlp-traces" && !record.request.trace?.recorded) continue;
      q.records.push(record);
      if (q.records.length > MAX_QUEUED) {
        q.dropped += q.records.splice(0, q.records.length - MAX_QUEUED).length;
      }
      any = true;
    }
    if (any) this.#arm();
  }

  stats(): Array<{ id: string; queued: number; dropped: number; failures: number }> {
    return [...this.#queues.values()].map((q) => ({
      id: q.destination.id,
      queued: q.records.length,
      dropped: q.dropped,
      failures: q.failures,
    }));
  }

  /**
   * The start (epoch ms) of the oldest request queued for a destination and not yet received by
   * it, or null when none is. History retention keeps the rows from then on
   * (docs/scaling.md "Retention").
   */
  oldestQueuedStart(): number | null {
    let oldest: number | null = null;
    for (const q of this.#queues.values()) {
      for (const record of q.records) {
        const at = record.request.startedAt;
        if (oldest === null || at < oldest) oldest = at;
      }
    }
    return oldest;
  }

  /** Sends what is queued now; resolves when every destination has answered once. */
  async flush(): Promise<void> {
    await Promise.all([...this.#queues.values()].map((q) => this.#send(q, { force: true })));
  }

  async close(): Promise<void> {
    this.#cancel?.();
    this.#cancel = null;
    await this.flush();
  }

  #arm(): void {
    if (this.#cancel) return;
    this.#cancel = this.opts.clock.after(FLUSH_EVERY_MS, async () => {
      this.#cancel = null;
      await Promise.all([...this.#queues.values()].map((q) => this.#send(q, { force: false })));
      if ([...this.#queues.values()].some((q) => q.records.length)) this.#arm();
    });
  }

  async #send(q: Queue, opts: { force: boolean }): Promise<void> {
    if (q.sending || !q.records.length) return;
    if (!opts.force && this.opts.clock.now() < q.retryAt) return;
    q.sending = true;
    const batch = q.records.slice(0, BATCH);
    try {
      const res = await this.opts.fetch(q.destination.url, {
        method: "POST",
        headers: this.#headers(q.destination),
        body: JSON.stringify(BODIES[q.destination.kind](batch)),
      });
      await res.body?.cancel();
      if (!res.ok) throw new Error(`receiver answered ${res.status}`);
      q.records.splice(0, batch.length);
      q.failures = 0;
    } catch (err) {
      q.failures++;
      const backoff = Math.min(RETRY_CAP_MS, 500 * 2 ** q.failures);
      q.retryAt = this.opts.clock.deadline(backoff);
      this.opts.log.event("export.failed", { destination: q.destination.id, error: String(err) });
    } finally {
      q.sending = false;
    }
  }

  #headers(destination: Destination): Headers {
    const headers = new Headers({ "content-type": "application/json" });
    for (const [name, envName] of Object.entries(destination.headers_env)) {
      const value = this.opts.env(envName);
      if (value) headers.set(name, value);
    }
    return headers;
  }
}
