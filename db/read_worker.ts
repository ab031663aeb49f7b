/**
 * The admin reader's thread, for a local file (db/worker_reads.ts). The local driver behind
 * `@libsql/client` runs a statement synchronously on the thread that calls it, so a cost report
 * over a month of history would hold the serving thread for the whole query.
 *
 * It holds a few read connections of its own, opened through libsql's promise API: that API
 * runs a statement up to its first row on the driver's own threads, so this thread stays free
 * while a query runs and can stop it at its bound with `interrupt()` (SQLite's
 * `sqlite3_interrupt`, which only another thread can call while a statement runs). The later
 * rows of a result are stepped on this thread; a query slow between rows is caught by the
 * watchdog on the serving thread, which replaces the whole worker. WAL lets these connections
 * read while the history worker writes (docs/scaling.md "Admin reads").
 *
 * The worker starts from this one function's source (a `data:` URL), as the history worker does
 * (db/history_worker.ts): self-contained, importing its one package itself. `load` is that
 * import (a test slows it down); the package is CommonJS, so its module's type is the class,
 * which `import()` hands over as `default`.
 */
export function readWorkerMain(
  load: () => Promise<{ default: typeof import("libsql/promise") }> = () =>
    import("libsql/promise"),
): void {
  type Job = { id: number; statements: { sql: string; args?: unknown[] }[] };
  type Message = Job & {
    open?: { path: string; timeoutMs: number; boundMs: number; nice?: number };
    close?: true;
  };
  type Port = {
    onmessage: ((event: MessageEvent<Message>) => void) | null;
    postMessage(message: unknown): void;
  };
  type Driver = Awaited<ReturnType<typeof load>>["default"];
  type Connection = InstanceType<Driver>;
  const port = globalThis as unknown as Port;
  let target: { path: string; timeoutMs: number; boundMs: number } | null = null;
  const idle: Connection[] = [];

  const open = async (Database: Driver): Promise<Connection> => {
    if (!target) throw new Error("admin reader: database not open");
    const conn = new Database(target.path, { timeout: target.timeoutMs });
    try {
      // A reader never writes: a statement that would is refused by SQLite itself.
      await conn.exec("PRAGMA query_only = 1");
    } catch (err) {
      conn.close();
      throw err;
    }
    return conn;
  };
  // A connection that was interrupted, or failed, is closed rather than kept: an interrupt that
  // lands as its statement ends would otherwise stop the next statement on it.
  const discard = (conn: Connection) => {
    try {
      conn.close();
    } catch {
      // Closing is best effort; the connection is dropped either way.
    }
  };
  const run = async (Database: Driver, job: Job): Promise<Record<string, unknown>[][]> => {
    if (!target) throw new Error("admin reader: database not open");
    const conn = idle.pop() ?? await open(Database);
    let stopped = false;
    // The bound of the whole job, in real time: it bounds SQLite's work, not a gateway wait.
    const timer = setTimeout(() => {
      stopped = true;
      conn.interrupt();
    }, target.boundMs);
    try {
      const results: Record<string, unknown>[][] = [];
      for (const { sql, args } of job.statements) {
        const statement = await conn.prepare(sql);
        results.push(await statement.all(args ?? []) as Record<string, unknown>[]);
        if (stopped) break;
      }
      if (stopped) throw Object.assign(new Error("interrupted"), { stopped: true });
      idle.push(conn);
      return results;
    } catch (err) {
      discard(conn);
      if (stopped) throw Object.assign(new Error("interrupted"), { stopped: true });
      throw err;
    } finally {
      clearTimeout(timer);
    }
  };
  const reply = (id: number, body: Record<string, unknown>) => port.postMessage({ id, ...body });
  const failed = (id: number, err: unknown) => {
    const code = err instanceof Error && "code" in err ? String(err.code) : undefined;
    const message = err instanceof Error ? err.message : String(err);
    const stopped = err instanceof Error && "stopped" in err;
    reply(id, { error: { message, code, stopped } });
  };
  const handle = async (Database: Driver, message: Message): Promise<Record<string, unknown>> => {
    if (message.open) {
      const { nice: _, ...opened } = message.open;
      target = opened;
      // One connection at once, so a file that cannot be read fails the start of the reader.
      idle.push(await open(Database));
      return warning === undefined ? {} : { warning };
    }
    if (message.close) {
      for (const conn of idle.splice(0)) discard(conn);
      target = null;
      return {};
    }
    return { results: await run(Database, message) };
  };
  // The listener is in place before anything is awaited: a message that reaches a worker with
  // none is dropped (Deno, as browsers, enables the worker's port once its script has run, not
  // once its promises settle), and the serving thread posts `open` the moment the worker is
  // made. Loading the driver can take several turns of this thread's event loop (a cold module
  // cache): the messages wait for it here, each answered once it is in, in the
  // order they came.
  // The thread gives way to the serving thread (docs/scaling.md "The database threads'
  // priority") before the driver loads: the threads the driver starts take this one's nice value.
  let warning: string | undefined;
  const lower = async (nice: number | undefined): Promise<void> => {
    if (!nice) return;
    try {
      (await import("node:os")).setPriority(0, nice);
    } catch (err) {
      warning = err instanceof Error ? err.message : String(err);
    }
  };
  let driver: ReturnType<typeof load> | null = null;
  port.onmessage = (event) => {
    const message = event.data;
    driver ??= lower(message.open?.nice).then(load);
    driver
      .then(({ default: Database }) => handle(Database, message))
      .then((body) => reply(message.id, body), (err) => failed(message.id, err));
  };
}
