/**
 * The history writer's database thread. The local libSQL driver runs a batch
 * synchronously, so on the serving thread every batch would stall requests.
 *
 * The worker starts from this one function's source (a `data:` URL), not
 * from a file: the gateway reads nothing from disk at run time besides its
 * data directory. So the function is self-contained: it imports its one
 * package itself and shares no closure with this module.
 */
export async function historyWorkerMain(): Promise<void> {
  // `sql` is sent with the first use of a text, `ref` alone after (db/batch_executor.ts).
  type Statement = { sql?: string; ref?: number; args?: unknown };
  type Message = {
    id: number;
    open?: { url: string; authToken?: string; timeoutMs: number };
    statements?: Statement[];
    close?: true;
  };
  type Port = {
    onmessage: ((event: MessageEvent<Message>) => void) | null;
    postMessage(message: unknown): void;
  };
  const port = globalThis as unknown as Port;
  const { createClient } = await import("@libsql/client");
  let client: ReturnType<typeof createClient> | null = null;
  const texts: string[] = [];
  const expand = ({ sql, ref, args }: Statement) => {
    if (sql !== undefined && ref !== undefined) texts[ref] = sql;
    const text = sql ?? (ref === undefined ? undefined : texts[ref]);
    if (text === undefined) throw new Error(`history worker: unknown statement ${ref}`);
    return { sql: text, args };
  };
  const handle = async (message: Message, statements: { sql: string; args?: unknown }[]) => {
    if (message.open) {
      const { url, authToken, timeoutMs } = message.open;
      client = createClient({ url, authToken, timeout: timeoutMs });
      return;
    }
    if (!client) throw new Error("history worker: database not open");
    if (message.close) {
      client.close();
      client = null;
      return;
    }
    try {
      await client.batch(statements as never, "write");
    } catch (err) {
      // A failed local write can leave its pooled connection unusable: start afresh (see writing()).
      if (client.protocol === "file" && !client.closed) void client.reconnect();
      throw err;
    }
  };
  port.onmessage = async (event) => {
    const { id } = event.data;
    try {
      // Expanded first, so texts are learnt even when the batch is refused.
      const statements = (event.data.statements ?? []).map(expand);
      await handle(event.data, statements);
      port.postMessage({ id });
    } catch (err) {
      const code = err instanceof Error && "code" in err ? String(err.code) : undefined;
      const message = err instanceof Error ? err.message : String(err);
      port.postMessage({ id, error: { message, code } });
    }
  };
}
