import { guardrailWorkerMain } from "./guardrail_worker.ts";

export interface MatchRule {
  pattern: string;
  flags: string;
}

/** `unchecked`: the budget ran out, or the rules could not run at all. */
export type MatchResult =
  | { kind: "matched"; rule: number } // index into the rules given
  | { kind: "clear" }
  | { kind: "unchecked"; reason: "size" | "budget" | "unavailable" };

interface Job {
  text: string;
  rules: MatchRule[];
  budgetMs: number;
  resolve: (result: MatchResult) => void;
}

const STARTUP_MS = 5_000;

type Reply = { ready: true } | { id: number; matched?: number | null; error?: string };

/**
 * Runs guardrail rules on one worker thread, started on first use and reused;
 * checks run one at a time. Each check gets `budgetMs` from the moment the
 * worker starts on it; past that the worker is terminated (which stops even a
 * regular expression stuck in backtracking) and the next check starts a fresh
 * one. The serving thread never runs a rule, so it never blocks on one.
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

  match(text: string, opts: { rules: MatchRule[]; budgetMs: number }): Promise<MatchResult> {
    if (this.#closed) return Promise.resolve({ kind: "unchecked", reason: "unavailable" });
    return new Promise((resolve) => {
      this.#queue.push({ text, rules: opts.rules, budgetMs: opts.budgetMs, resolve });
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
    if (this.#running || this.#queue.length === 0) return;
    const job = this.#queue.shift()!;
    this.#running = { job, id: this.#next++ };
    try {
      this.#worker ??= this.#start();
    } catch {
      // A runtime without workers cannot bound a rule's time: the rules do not run.
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

  #start(): Worker {
    const source = `(${guardrailWorkerMain.toString()})()`;
    const worker = new Worker(`data:application/javascript,${encodeURIComponent(source)}`, {
      type: "module",
    });
    worker.onmessage = (event: MessageEvent<Reply>) => {
      const reply = event.data;
      if ("ready" in reply) {
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
