import type { Clock } from "../runtime/clock.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import type { Metrics } from "../runtime/metrics.ts";

/**
 * The process's budget of embedding vectors in memory (docs/security.md "Embeddings stay
 * bounded"). Bytes: four of the largest requests at once (2,048 inputs of 3,072 values, 24 MiB of
 * float32 each); three such requests at once took the process from 110 to 760 MB before vectors
 * were read as they arrive, and hold about 72 MiB of float32 now. Waiting: how many requests may
 * queue for room; one more is refused at once, so a flood of requests holds no more than that.
 */
export const VECTOR_BUDGET = {
  bytes: 96 * 1024 * 1024,
  waiting: 32,
} as const;

/** Bytes a request holds of the budget: `shrink` to what it turned out to need, `release` once. */
export interface VectorHold {
  readonly bytes: number;
  shrink(bytes: number): void;
  release(): void;
}

interface Waiter {
  bytes: number;
  grant(): void;
}

/**
 * Bytes of float32 vectors that embeddings requests hold, from before their first upstream call
 * until their client has read the answer (or the request failed): a request takes what its
 * answer may hold (`valuesAllowed` × 4) or waits, first come first served, up to `waitMs`
 * (scaled); then it is answered 429 `gw.embeddings.memory_full`. A waiter never overtakes an
 * earlier one, so a large request is not starved by small ones.
 */
export class VectorBudget {
  #taken = 0;
  readonly #queue: Waiter[] = [];

  constructor(
    private opts: { bytes: number; waiting: number; clock: Clock; metrics: Metrics },
  ) {}

  /** Bytes held now, by every request. */
  get taken(): number {
    return this.#taken;
  }

  /**
   * Takes `bytes` now or in turn; answers the hold, the 429 when no room came in time (or the
   * queue is full), or null when `signal` fired while it waited.
   */
  take(
    bytes: number,
    opts: { waitMs: number; signal: AbortSignal },
  ): Promise<VectorHold | GatewayError | null> {
    const wanted = Math.min(bytes, this.opts.bytes);
    if (this.#queue.length === 0 && this.#fits(wanted)) return Promise.resolve(this.#hold(wanted));
    if (this.#queue.length >= this.opts.waiting || opts.waitMs <= 0 || opts.signal.aborted) {
      return Promise.resolve(opts.signal.aborted ? null : this.#full(wanted));
    }
    return new Promise((resolve) => {
      const giveUp = (answer: GatewayError | null) => {
        const at = this.#queue.indexOf(waiter);
        if (at < 0) return; // already granted
        this.#queue.splice(at, 1);
        done(answer);
        // The head may have been what held the others back.
        this.#handOut();
      };
      const onAbort = () => giveUp(null);
      const cancel = this.opts.clock.after(opts.waitMs, () => giveUp(this.#full(wanted)));
      const done = (answer: VectorHold | GatewayError | null) => {
        cancel();
        opts.signal.removeEventListener("abort", onAbort);
        resolve(answer);
      };
      const waiter: Waiter = { bytes: wanted, grant: () => done(this.#hold(wanted)) };
      opts.signal.addEventListener("abort", onAbort);
      this.#queue.push(waiter);
    });
  }

  #fits(bytes: number): boolean {
    return this.#taken + bytes <= this.opts.bytes;
  }

  #full(bytes: number): GatewayError {
    return new GatewayError(
      `the gateway holds ${this.#taken} bytes of embedding vectors, its budget is ` +
        `${this.opts.bytes}: no room for this request's ${bytes} in time`,
      // Room frees when an answer is read, which nothing here can foretell: a short hint.
      { code: "gw.embeddings.memory_full", retryAfterSecs: 1 },
    );
  }

  #hold(bytes: number): VectorHold {
    this.#move(bytes);
    let held = bytes;
    const give = (back: number) => {
      this.#move(-back);
      held -= back;
      this.#handOut();
    };
    return {
      get bytes() {
        return held;
      },
      shrink: (to) => {
        if (to < held) give(held - to);
      },
      release: () => {
        if (held > 0) give(held);
      },
    };
  }

  #move(by: number): void {
    this.#taken += by;
    this.opts.metrics.embeddingVectorBytes = this.#taken;
  }

  /** Grants waiters in order while the first of them fits. */
  #handOut(): void {
    while (this.#queue.length && this.#fits(this.#queue[0]!.bytes)) this.#queue.shift()!.grant();
  }
}

const BUDGETS = new WeakMap<Metrics, VectorBudget>();

/** One budget per gateway, found by its metrics (each gateway has its own): the process's. */
export function vectorBudget(deps: { clock: Clock; metrics: Metrics }): VectorBudget {
  let budget = BUDGETS.get(deps.metrics);
  if (!budget) {
    budget = new VectorBudget({ ...VECTOR_BUDGET, clock: deps.clock, metrics: deps.metrics });
    BUDGETS.set(deps.metrics, budget);
  }
  return budget;
}
