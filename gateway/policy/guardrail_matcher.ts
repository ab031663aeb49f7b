import { type MatchRule, spawnGuardrailWorker, type WorkerReply } from "./guardrail_worker.ts";

/**
 * Why a request was not checked in full: text over the cap (`size`, decided by
 * the caller), a file sent as text that could not be decoded (`undecodable`,
 * decided by the caller), the rules outran the budget (`budget`), the worker
 * was busy for longer than the budget (`busy`), or no worker could run them
 * (`unavailable`).
 */
export type UncheckedReason =
  | "size"
  | "undecodable"
  | "budget"
  | "busy"
  | "unavailable"
  /** Token ids in an embeddings input: numbers, no text a rule reads. */
  | "tokens";

export type MatchResult =
  | { kind: "matched"; rule: number } // index into the rules given
  | { kind: "clear" }
  | { kind: "unchecked"; reason: UncheckedReason };

interface Job {
  text: string;
  rules: MatchRule[];
  budgetMs: number;
  resolve: (result: MatchResult) => void;
  queuedAt: number;
  /** `#startupMs()` when queued: time spent starting a worker is not counted as waiting. */
  startupAt: number;
}

const STARTUP_MS = 5_000;

/**
 * Runs guardrail rules on one worker thread, started on first use and reused;
 * checks run one at a time. Each check gets `budgetMs` from the moment the
 * worker starts on it; past that the worker is terminated (which stops even a
 * regular expression stuck in backtracking) and the next check starts a fresh
 * one. A check that waited longer than its budget for the worker is not
 * started (`busy`), so a burst of slow checks cannot grow the wait without
 * bound. The serving thread never runs a rule, so it never blocks on one.
 *
 * The budget is real time, deliberately not scaled by the gateway clock: it
 * bounds CPU work, not a protocol wait (docs/security.md).
 */
export class GuardrailMatcher {
  #worker: Worker | null = null;
  #ready = false;
  #queue: Job[] = [];
  #running: { job: Job; id: number; timer?: ReturnType<typeof setTimeout> } | null = null;
  #next = 0;
  #closed = false;
  #startupDone = 0;
  #startingSince: number | null = null;
  /** Why `new Worker` threw: said once, then every check ends `unavailable` at once. */
  #noWorkers: Error | null = null;

  /** `onUnavailable` hears why a worker could not start (a runtime without workers). */
  constructor(private opts: { onUnavailable?: (err: unknown) => void } = {}) {}

  match(text: string, opts: { rules: MatchRule[]; budgetMs: number }): Promise<MatchResult> {
    if (this.#closed) return Promise.resolve({ kind: "unchecked", reason: "unavailable" });
    return new Promise((resolve) => {
      const queued = { queuedAt: performance.now(), startupAt: this.#startupMs() };
      this.#queue.push({ text, rules: opts.rules, budgetMs: opts.budgetMs, resolve, ...queued });
      this.#pump();
    });
  }

  /** Stops the worker; checks still waiting end `unchecked`. */
  close(): void {
    this.#closed = true;
    this.#finish({ kind: "unchecked", reason: "unavailable" });
    for (const job of this.#queue.splice(0)) {
      job.resolve({ kind: "unchecked", reason: "unavailable" });
    }
    this.#stopWorker();
  }

  #pump(): void {
    if (this.#running) return;
    const job = this.#nextJob();
    if (!job) return;
    this.#running = { job, id: this.#next++ };
    try {
      if (this.#noWorkers) throw this.#noWorkers;
      this.#worker ??= this.#start();
    } catch (err) {
      // A runtime without workers cannot bound a rule's time: the rules do not run.
      if (!this.#noWorkers) this.opts.onUnavailable?.(err);
      this.#noWorkers ??= err instanceof Error ? err : new Error(String(err));
      return this.#finish({ kind: "unchecked", reason: "unavailable" });
    }
    if (this.#ready) return this.#send();
    // Starting a worker is not charged to the budget, but a worker that never starts ends the check.
    this.#arm(STARTUP_MS, "unavailable");
  }

  #arm(ms: number, reason: "budget" | "unavailable"): void {
    const running = this.#running!;
    clearTimeout(running.timer);
    // Real time on purpose (see the class comment): this bounds CPU work.
    running.timer = setTimeout(() => {
      this.#stopWorker();
      this.#finish({ kind: "unchecked", reason });
    }, ms);
  }

  /** The first queued job that has not waited past its budget; the others end `busy`. */
  #nextJob(): Job | undefined {
    for (let job = this.#queue.shift(); job; job = this.#queue.shift()) {
      const waited = performance.now() - job.queuedAt - (this.#startupMs() - job.startupAt);
      if (waited <= job.budgetMs) return job;
      job.resolve({ kind: "unchecked", reason: "busy" });
    }
  }

  /** Total time spent starting workers so far, the one in progress included. */
  #startupMs(): number {
    const since = this.#startingSince;
    return this.#startupDone + (since === null ? 0 : performance.now() - since);
  }

  #start(): Worker {
    this.#startingSince = performance.now();
    const worker = spawnGuardrailWorker();
    worker.onmessage = (event: MessageEvent<WorkerReply>) => {
      const reply = event.data;
      if ("ready" in reply) {
        this.#startupDone = this.#startupMs();
        this.#startingSince = null;
        this.#ready = true;
        if (this.#running) this.#send();
        return;
      }
      if (reply.id !== this.#running?.id) return;
      if (reply.error !== undefined) this.#finish({ kind: "unchecked", reason: "unavailable" });
      else if (typeof reply.matched === "number") {
        this.#finish({ kind: "matched", rule: reply.matched });
      } else this.#finish({ kind: "clear" });
    };
    worker.onerror = (event) => {
      event.preventDefault();
      this.opts.onUnavailable?.(event.message);
      this.#stopWorker();
      this.#finish({ kind: "unchecked", reason: "unavailable" });
    };
    return worker;
  }

  #send(): void {
    const { job, id } = this.#running!;
    this.#arm(job.budgetMs, "budget");
    const rules = job.rules.map(({ pattern, flags }) => ({ pattern, flags }));
    this.#worker!.postMessage({ id, text: job.text, rules });
  }

  #stopWorker(): void {
    this.#startupDone = this.#startupMs();
    this.#startingSince = null;
    this.#worker?.terminate();
    this.#worker = null;
    this.#ready = false;
  }

  #finish(result: MatchResult): void {
    const running = this.#running;
    if (!running) return;
    clearTimeout(running.timer);
    this.#running = null;
    running.job.resolve(result);
    if (this.#closed) this.#stopWorker();
    else this.#pump();
  }
}
