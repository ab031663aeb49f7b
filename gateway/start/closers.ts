/**
 * What a starting gateway has opened, closed in reverse order: on shutdown, and when the start
 * fails half-way (a config that does not load, a port in use), so a failed start leaves no
 * database connection, worker thread, HTTP client or timer behind.
 */
export class Closers {
  readonly #list: { name: string; close: () => void | Promise<void> }[] = [];
  #closing: Promise<void> | null = null;

  /** Registers `close` for something just opened; it runs before everything opened earlier. */
  add(name: string, close: () => void | Promise<void>): void {
    this.#list.push({ name, close });
  }

  /**
   * Runs every closer once, last added first. One that throws does not stop the others; the
   * failures are reported to `onError` by name. Idempotent: a second call waits for the first.
   */
  closeAll(onError: (name: string, err: unknown) => void = () => {}): Promise<void> {
    this.#closing ??= (async () => {
      for (let entry = this.#list.pop(); entry; entry = this.#list.pop()) {
        const { name, close } = entry;
        try {
          await close();
        } catch (err) {
          onError(name, err);
        }
      }
    })();
    return this.#closing;
  }
}
