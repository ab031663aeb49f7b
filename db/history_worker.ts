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
  type Statement = { sql: string; args?: unknown[] };
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
  const handle = async (message: Message) => {
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
      await client.batch((message.statements ?? []) as never, "write");
    } catch (err) {
      // A failed local write can leave its pooled connection unusable: start afresh (see writing()).
      if (client.protocol === "file" && !client.closed) void client.reconnect();
      throw err;
    }
  };
  port.onmessage = async (event) => {
    const { id } = event.data;
    try {
      await handle(event.data);
      port.postMessage({ id });
    } catch (err) {
      const code = err instanceof Error && "code" in err ? String(err.code) : undefined;
      const message = err instanceof Error ? err.message : String(err);
      port.postMessage({ id, error: { message, code } });
    }
  };
}
