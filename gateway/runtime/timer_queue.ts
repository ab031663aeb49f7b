/**
 * One runtime timer for all of a clock's timers (gateway/runtime/clock.ts): a binary heap of
 * deadlines, and the one runtime timer armed for the earliest. A runtime timer cost about 5 µs
 * to set and 570 B of JS heap while pending (Deno 2.9, docs/benchmarks.md "One timer per
 * clock"), and every request sets two (its body's read timer, its hop's idle timer) and every
 * held stream keeps three pending; an entry here is a small object and a heap step. Most
 * timers are set for the same span (a 300 s idle timeout), so a new one lands behind the
 * earliest and the runtime timer is not touched.
 *
 * Each due entry runs in a runtime timer's callback of its own, as it did with a runtime timer
 * per entry: the microtasks one queues run before the next fires.
 */
export interface TimerHost<H> {
  /** Monotonic milliseconds. */
  now(): number;
  /** Sets a runtime timer; answers what `disarm` takes. */
  arm(ms: number, fire: () => void): H;
  disarm(handle: H): void;
}

/** One pending timer; `index` is its place in the heap, -1 once it has fired or is cancelled. */
export interface TimerEntry {
  readonly at: number;
  readonly seq: number;
  readonly fn: () => void;
  index: number;
}

export class TimerQueue<H> {
  readonly #heap: TimerEntry[] = [];
  #seq = 0;
  #handle: H | null = null;
  /** The deadline the runtime timer is armed for. */
  #armedAt = Infinity;

  constructor(private readonly host: TimerHost<H>) {}

  /** Pending entries, for tests. */
  get size(): number {
    return this.#heap.length;
  }

  /** Runs `fn` once `ms` have passed; equal deadlines run in the order they were added. */
  add(ms: number, fn: () => void): TimerEntry {
    const heap = this.#heap;
    const entry: TimerEntry = {
      at: this.host.now() + Math.max(0, ms),
      seq: this.#seq++,
      fn,
      index: heap.length,
    };
    heap.push(entry);
    this.#up(entry.index);
    if (entry.index === 0) this.#arm();
    return entry;
  }

  /** Cancels a pending entry; one that has fired or is cancelled already is left alone. */
  remove(entry: TimerEntry): void {
    const at = entry.index;
    if (at < 0) return;
    entry.index = -1;
    const heap = this.#heap;
    const last = heap.pop()!;
    if (last !== entry) {
      heap[at] = last;
      last.index = at;
      this.#down(at);
      this.#up(last.index);
    }
    // Nothing pending holds no runtime timer: the process may exit. An earlier armed timer
    // is otherwise left to fire and re-arm for what is then first.
    if (heap.length === 0) this.#disarm();
  }

  readonly #fire = (): void => {
    this.#handle = null;
    this.#armedAt = Infinity;
    const first = this.#heap[0];
    if (first && first.at <= this.host.now()) {
      this.remove(first);
      // Armed for the next before this one runs, so a throwing callback stops no other timer.
      this.#arm();
      first.fn();
      return;
    }
    this.#arm();
  };

  #arm(): void {
    const first = this.#heap[0];
    if (!first) return this.#disarm();
    if (this.#handle !== null && this.#armedAt <= first.at) return;
    this.#disarm();
    this.#armedAt = first.at;
    this.#handle = this.host.arm(Math.max(0, first.at - this.host.now()), this.#fire);
  }

  #disarm(): void {
    if (this.#handle === null) return;
    this.host.disarm(this.#handle);
    this.#handle = null;
    this.#armedAt = Infinity;
  }

  #before(a: TimerEntry, b: TimerEntry): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }

  #up(at: number): void {
    const heap = this.#heap;
    const entry = heap[at]!;
    while (at > 0) {
      const parentAt = (at - 1) >> 1;
      const parent = heap[parentAt]!;
      if (!this.#before(entry, parent)) break;
      heap[at] = parent;
      parent.index = at;
      at = parentAt;
    }
    heap[at] = entry;
    entry.index = at;
  }

  #down(at: number): void {
    const heap = this.#heap;
    const entry = heap[at]!;
    const size = heap.length;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= size) break;
      const right = left + 1;
      const child = right < size && this.#before(heap[right]!, heap[left]!) ? right : left;
      if (!this.#before(heap[child]!, entry)) break;
      heap[at] = heap[child]!;
      heap[at]!.index = at;
      at = child;
    }
    heap[at] = entry;
    entry.index = at;
  }
}
