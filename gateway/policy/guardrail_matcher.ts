import { REAL_TIME, workMs } from "../runtime/clock.ts";
import {
  type MatchRule,
  type RuleRunner,
  type RunnerKind,
  runnerKind,
  type RunnerReply,
  spawnRuleRunner,
} from "./guardrail_runner.ts";

/**
 * Why a request was not checked in full: text over the cap (`size`, decided by
 * the caller), a file sent as text that could not be decoded (`undecodable`,
 * decided by the caller), the rules outran the budget (`budget`), the runner
 * was busy for longer than the budget (`busy`), or no runner could run them
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
  /** `#startupMs()` when queued: time spent starting a runner is not counted as waiting. */
  startupAt: number;
}

const STARTUP_MS = 5_000;

/**
 * Runs guardrail rules in one runner (a child process, or a worker thread where the gateway may
 * not start one: guardrail_runner.ts), started on first use and reused; checks run one at a
 * time. Each check gets `budgetMs` from the moment the runner starts on it; past that the runner
 * is stopped (a process is killed, which ends even a regular expression stuck in backtracking) and
 * the next check starts a fresh one. A check that waited longer than its budget for the runner is
 * not started (`busy`), so a burst of slow checks cannot grow the wait without bound. The serving
 * thread never runs a rule, so it never blocks on one.
 *
 * The budget is real time, deliberately not scaled by the gateway clock: it
 * bounds CPU work, not a protocol wait (docs/security.md).
 */
export class GuardrailMatcher {
  #runner: RuleRunner | null = null;
  /** Runners being stopped: `close` waits for them, so none outlives the matcher. */
  #stopping = new Set<Promise<void>>();
  #ready = false;
  #queue: Job[] = [];
  #running: { job: Job; id: number; cancel?: () => void } | null = null;
  #next = 0;
  #closed = false;
  #startupDone = 0;
  #startingSince: number | null = null;
  /** Why no runner could start: said once, then every check ends `unavailable` at once. */
  #noRunner: Error | null = null;
  readonly kind: RunnerKind;

  /**
   * `onUnavailable` hears why a runner could not start or died (a runtime without workers).
   * `kind` is decided once, by what the runtime may do, unless given.
   */
  constructor(
    private opts: { onUnavailable?: (err: unknown) => void; kind?: RunnerKind } = {},
  ) {
    this.kind = opts.kind ?? runnerKind();
  }

  match(text: string, opts: { rules: MatchRule[]; budgetMs: number }): Promise<MatchResult> {
    if (this.#closed) return Promise.resolve({ kind: "unchecked", reason: "unavailable" });
    return new Promise((resolve) => {
      const queued = { queuedAt: workMs(), startupAt: this.#startupMs() };
      this.#queue.push({ text, rules: opts.rules, budgetMs: opts.budgetMs, resolve, ...queued });
      this.#pump();
    });
  }

  /** Stops the runner; checks still waiting end `unchecked`. Resolves once no runner is left. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#finish({ kind: "unchecked", reason: "unavailable" });
    for (const job of this.#queue.splice(0)) {
      job.resolve({ kind: "unchecked", reason: "unavailable" });
    }
    this.#stopRunner();
    await Promise.all(this.#stopping);
  }

  #pump(): void {
    if (this.#running) return;
    const job = this.#nextJob();
    if (!job) return;
    this.#running = { job, id: this.#next++ };
    try {
      if (this.#noRunner) throw this.#noRunner;
      this.#runner ??= this.#start();
    } catch (err) {
      // A runtime without a runner cannot bound a rule's time: the rules do not run.
      if (!this.#noRunner) this.opts.onUnavailable?.(err);
      this.#noRunner ??= err instanceof Error ? err : new Error(String(err));
      return this.#finish({ kind: "unchecked", reason: "unavailable" });
    }
    if (this.#ready) return this.#send();
    // Starting a runner is not charged to the budget, but a runner that never starts ends the check.
    this.#arm(STARTUP_MS, "unavailable");
  }

  #arm(ms: number, reason: "budget" | "unavailable"): void {
    const running = this.#running!;
    running.cancel?.();
    // Real time on purpose (see the class comment): this bounds CPU work.
    running.cancel = REAL_TIME.after(ms, () => {
      this.#stopRunner();
      this.#finish({ kind: "unchecked", reason });
    });
  }

  /** The first queued job that has not waited past its budget; the others end `busy`. */
  #nextJob(): Job | undefined {
    for (let job = this.#queue.shift(); job; job = this.#queue.shift()) {
      const waited = workMs() - job.queuedAt - (this.#startupMs() - job.startupAt);
      if (waited <= job.budgetMs) return job;
      job.resolve({ kind: "unchecked", reason: "busy" });
    }
  }

  /** Total time spent starting runners so far, the one in progress included. */
  #startupMs(): number {
    const since = this.#startingSince;
    return this.#startupDone + (since === null ? 0 : workMs() - since);
  }

  #start(): RuleRunner {
    this.#startingSince = workMs();
    return spawnRuleRunner(this.kind, {
      onReply: (reply) => this.#reply(reply),
      onFailure: (why) => {
        this.opts.onUnavailable?.(why);
        this.#stopRunner();
        this.#finish({ kind: "unchecked", reason: "unavailable" });
      },
    });
  }

  #reply(reply: RunnerReply): void {
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
  }

  #send(): void {
    const { job, id } = this.#running!;
    this.#arm(job.budgetMs, "budget");
    const rules = job.rules.map(({ pattern, flags }) => ({ pattern, flags }));
    this.#runner!.send({ id, text: job.text, rules });
  }

  #stopRunner(): void {
    this.#startupDone = this.#startupMs();
    this.#startingSince = null;
    const runner = this.#runner;
    this.#runner = null;
    if (runner) {
      const stopped = runner.stop().finally(() => this.#stopping.delete(stopped));
      this.#stopping.add(stopped);
    }
    this.#ready = false;
  }

  #finish(result: MatchResult): void {
    const running = this.#running;
    if (!running) return;
    running.cancel?.();
    this.#running = null;
    running.job.resolve(result);
    if (this.#closed) this.#stopRunner();
    else this.#pump();
  }
}
