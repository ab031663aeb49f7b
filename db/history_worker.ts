/**
 * The history writer's database thread, for a local file. The local libSQL driver runs
 * statements synchronously, so on the serving thread every batch would stall requests.
 *
 * It holds one connection of its own with the statements it has run prepared and kept: the
 * writer sends a few statement texts over and over (db/history_rows.ts), and parsing a
 * many-row upsert again for every batch cost more than the rows themselves. The connection runs
 * `synchronous=NORMAL` (docs/scaling.md "Durability of a local file"): a commit is in the WAL
 * when it returns, so a process crash loses nothing committed, and only a power loss can lose
 * the last commits before the next checkpoint.
 *
 * The worker starts from this one function's source (a `data:` URL), not from a file: the
 * gateway reads nothing from disk at run time besides its data directory. So the function is
 * self-contained: it imports its one package itself and shares no closure with this module.
 */
export function historyWorkerMain(
  load: () => Promise<typeof import("@libsql/client/sqlite3")> = () =>
    import("@libsql/client/sqlite3"),
): void {
  // `sql` is sent with the first use of a text, `ref` alone after (db/batch_executor.ts).
  type Statement = { sql?: string; ref?: number; args?: unknown[] };
  type Message = {
    id: number;
    open?: { path: string; timeoutMs: number; nice?: number };
    statements?: Statement[];
    close?: true;
  };
  type Port = {
    onmessage: ((event: MessageEvent<Message>) => void) | null;
    postMessage(message: unknown): void;
  };
  const port = globalThis as unknown as Port;
  type Pool = Awaited<ReturnType<typeof load>>["ConnectionPool"];
  let ConnectionPool: Pool | null = null;
  type Connection = ReturnType<InstanceType<Pool>["acquireSync"]>;
  type Prepared = ReturnType<Connection["prepare"]>;
  let target: { path: string; timeoutMs: number } | null = null;
  // node:os's setPriority, which on Linux sets the calling thread's nice value alone.
  let setPriority: ((pid: number, priority: number) => void) | null = null;
  let pool: InstanceType<Pool> | null = null;
  let db: Connection | null = null;
  const texts: string[] = [];
  // Prepared statements by text number; dropped with their connection.
  let prepared: Prepared[] = [];

  const connect = (): Connection => {
    if (db) return db;
    if (!target) throw new Error("history worker: database not open");
    if (!ConnectionPool) throw new Error("history worker: driver not loaded");
    const opened = new ConnectionPool(target.path, { timeout: target.timeoutMs }, 1);
    try {
      const conn = opened.acquireSync();
      // Per connection, and only outside a transaction.
      conn.exec("PRAGMA synchronous=NORMAL");
      pool = opened;
      db = conn;
      return conn;
    } catch (err) {
      opened.close();
      throw err;
    }
  };
  /**
   * A failed write may leave a statement active on the connection (a busy lock is retryable,
   * so SQLite keeps it running), and every later COMMIT on it would then fail. Start afresh.
   */
  const disconnect = () => {
    pool?.close();
    pool = null;
    db = null;
    prepared = [];
  };
  const statementFor = (conn: Connection, { sql, ref }: Statement): Prepared => {
    if (sql !== undefined && ref !== undefined) texts[ref] = sql;
    if (ref !== undefined) {
      const kept = prepared[ref];
      if (kept) return kept;
      const text = texts[ref];
      if (text === undefined) throw new Error(`history worker: unknown statement ${ref}`);
      return prepared[ref] = conn.prepare(text);
    }
    if (sql === undefined) throw new Error("history worker: a statement without text");
    return conn.prepare(sql);
  };
  const write = (statements: Statement[]): number[] => {
    // Texts first, so they are learnt even when the batch is refused.
    for (const { sql, ref } of statements) {
      if (sql !== undefined && ref !== undefined) texts[ref] = sql;
    }
    const conn = connect();
    try {
      conn.exec("BEGIN IMMEDIATE");
      const changes: number[] = [];
      for (const statement of statements) {
        // A pragma that works in steps (incremental_vacuum) is left half-run by a prepared
        // statement's one step, and COMMIT then fails: exec runs it to its end.
        const text = statement.ref === undefined ? statement.sql : texts[statement.ref];
        if (text?.startsWith("PRAGMA ") && !statement.args?.length) {
          conn.exec(text);
          changes.push(0);
          continue;
        }
        changes.push(statementFor(conn, statement).run(statement.args ?? []).changes);
      }
      conn.exec("COMMIT");
      return changes;
    } catch (err) {
      try {
        if (conn.inTransaction) conn.exec("ROLLBACK");
      } catch {
        // The connection is dropped next, which ends its transaction too.
      }
      disconnect();
      throw err;
    }
  };
  /**
   * This thread only gives way to the serving thread (docs/scaling.md "The database threads'
   * priority"): told to the writer, which logs it, when the system refuses.
   */
  const lower = (nice: number): string | undefined => {
    try {
      if (!setPriority) throw new Error("node:os setPriority is not available");
      setPriority(0, nice);
      return undefined;
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
  };
  const handle = (message: Message): { changes: number[]; warning?: string } => {
    if (message.open) {
      const { nice, ...open } = message.open;
      target = open;
      disconnect();
      connect();
      return { changes: [], warning: nice ? lower(nice) : undefined };
    }
    if (message.close) {
      disconnect();
      target = null;
      return { changes: [] };
    }
    return { changes: write(message.statements ?? []) };
  };
  const answer = (message: Message) => {
    const { id } = message;
    try {
      const { changes, warning } = handle(message);
      port.postMessage(warning === undefined ? { id, changes } : { id, changes, warning });
    } catch (err) {
      const code = err instanceof Error && "code" in err ? String(err.code) : undefined;
      const text = err instanceof Error ? err.message : String(err);
      port.postMessage({ id, error: { message: text, code } });
    }
  };
  // The listener is in place before anything is awaited: a message that reaches a worker with
  // none is dropped, and the writer posts `open` the moment the worker is made (the admin
  // reader's thread does the same, db/read_worker.ts). Messages that come while the driver
  // loads wait for it, and are answered in order.
  const driver = Promise.all([load(), import("node:os").catch(() => null)]).then(
    ([loaded, os]) => {
      ConnectionPool = loaded.ConnectionPool;
      setPriority = os?.setPriority ?? null;
    },
  );
  port.onmessage = (event) => {
    const message = event.data;
    driver.then(() => answer(message), (err) => {
      const text = err instanceof Error ? err.message : String(err);
      port.postMessage({ id: message.id, error: { message: `history worker: ${text}` } });
    });
  };
}
