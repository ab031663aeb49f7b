import {
  type Client,
  createClient,
  type InValue,
  type ResultSet,
  type Transaction,
} from "@libsql/client";

/**
 * A stand-in for sqld: the Hrana v2 protocol over HTTP (`POST /v2/pipeline`, JSON), executed on a
 * local database file. Enough for the web client the gateway uses for `http:`/`libsql:` URLs:
 * statements, batches with conditions, and streams (a baton per stream, one connection each, so
 * an interactive transaction stays on its connection). No auth, no v3, no cursors.
 */
export interface FakeSqld {
  url: string;
  close(): Promise<void>;
}

type HranaValue =
  | { type: "null" }
  | { type: "integer"; value: string }
  | { type: "float"; value: number }
  | { type: "text"; value: string }
  | { type: "blob"; base64: string };

interface HranaStmt {
  sql?: string;
  sql_id?: number;
  args?: HranaValue[];
  named_args?: { name: string; value: HranaValue }[];
}

type Condition =
  | { type: "ok" | "error"; step: number }
  | { type: "not"; cond: Condition }
  | { type: "and" | "or"; conds: Condition[] };

interface Steps {
  steps: { stmt: HranaStmt; condition?: Condition | null }[];
}

export function startFakeSqld(file: string, opts: { port?: number } = {}): FakeSqld {
  const streams = new Map<string, Stream>();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: opts.port ?? 0, onListen() {} },
    async (req) => {
      const path = new URL(req.url).pathname;
      if (req.method === "GET") return new Response(null, { status: path === "/v2" ? 200 : 404 });
      if (req.method !== "POST" || path !== "/v2/pipeline") {
        return new Response(null, { status: 404 });
      }
      const body = await req.json() as { baton: string | null; requests: { type: string }[] };
      let baton = body.baton;
      const stream = (baton ? streams.get(baton) : undefined) ??
        {
          client: createClient({ url: `file:${file}`, timeout: 5_000 }),
          sqls: new Map(),
          tx: null,
        };
      const results: unknown[] = [];
      let closing = false;
      for (const request of body.requests) {
        try {
          results.push({ type: "ok", response: await handle(stream, request) });
          if (request.type === "close") closing = true;
        } catch (err) {
          results.push({ type: "error", error: hranaError(err) });
        }
      }
      if (closing) {
        if (baton) streams.delete(baton);
        stream.tx?.close();
        stream.client.close();
        baton = null;
      } else {
        baton ??= crypto.randomUUID();
        streams.set(baton, stream);
      }
      return Response.json({ baton, base_url: null, results });
    },
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    close: async () => {
      for (const stream of streams.values()) stream.client.close();
      streams.clear();
      await server.shutdown();
    },
  };
}

/** One Hrana stream: its connection and the statements it stored by id. */
interface Stream {
  client: Client;
  sqls: Map<number, string>;
  /** The driver keeps a transaction on a connection of its own: BEGIN opens one, COMMIT ends it. */
  tx: Transaction | null;
}

async function handle(stream: Stream, request: { type: string }): Promise<unknown> {
  const r = request as { type: string; stmt: HranaStmt; batch: Steps; sql: string; sql_id: number };
  switch (request.type) {
    case "execute":
      return { type: "execute", result: await run(stream, r.stmt) };
    case "batch":
      return { type: "batch", result: await batch(stream, r.batch) };
    case "sequence":
      await stream.client.executeMultiple(r.sql);
      return { type: "sequence" };
    case "store_sql":
      stream.sqls.set(r.sql_id, r.sql);
      return { type: "store_sql" };
    case "close_sql":
      stream.sqls.delete(r.sql_id);
      return { type: "close_sql" };
    case "close":
      return { type: "close" };
    default:
      throw new Error(`fake sqld: unsupported request ${request.type}`);
  }
}

async function batch(stream: Stream, steps: Steps) {
  const stepResults: unknown[] = [];
  const stepErrors: unknown[] = [];
  const holds = (c: Condition): boolean => {
    switch (c.type) {
      case "ok":
        return stepResults[c.step] != null;
      case "error":
        return stepErrors[c.step] != null;
      case "not":
        return !holds(c.cond);
      case "and":
        return c.conds.every(holds);
      case "or":
        return c.conds.some(holds);
    }
  };
  for (const step of steps.steps) {
    if (step.condition && !holds(step.condition)) {
      stepResults.push(null);
      stepErrors.push(null);
      continue;
    }
    try {
      stepResults.push(await run(stream, step.stmt));
      stepErrors.push(null);
    } catch (err) {
      stepResults.push(null);
      stepErrors.push(hranaError(err));
    }
  }
  return { step_results: stepResults, step_errors: stepErrors };
}

async function run(stream: Stream, stmt: HranaStmt) {
  const sql = stmt.sql ?? stream.sqls.get(stmt.sql_id ?? -1);
  if (sql === undefined) throw new Error(`fake sqld: no statement ${stmt.sql_id}`);
  const args = stmt.named_args?.length
    ? Object.fromEntries(
      stmt.named_args.map((a) => [a.name.replace(/^[:@$]/, ""), decode(a.value)]),
    )
    : (stmt.args ?? []).map(decode);
  const rs = await execute(stream, { sql, args });
  return {
    cols: rs.columns.map((name, i) => ({ name, decltype: rs.columnTypes[i] || null })),
    rows: rs.rows.map((row) => Array.from({ length: rs.columns.length }, (_, i) => encode(row[i]))),
    affected_row_count: rs.rowsAffected,
    last_insert_rowid: rs.lastInsertRowid === undefined ? null : String(rs.lastInsertRowid),
  };
}

const EMPTY = {
  columns: [],
  columnTypes: [],
  rows: [],
  rowsAffected: 0,
  lastInsertRowid: undefined,
};

async function execute(
  stream: Stream,
  stmt: { sql: string; args: InValue[] | Record<string, InValue> },
): Promise<Pick<ResultSet, keyof typeof EMPTY>> {
  const verb = stmt.sql.trim().toUpperCase();
  if (verb.startsWith("BEGIN")) {
    stream.tx = await stream.client.transaction(verb.includes("IMMEDIATE") ? "write" : "deferred");
    return EMPTY;
  }
  if ((verb === "COMMIT" || verb === "ROLLBACK") && stream.tx) {
    const tx = stream.tx;
    stream.tx = null;
    await (verb === "COMMIT" ? tx.commit() : tx.rollback());
    return EMPTY;
  }
  return await (stream.tx ?? stream.client).execute(stmt);
}

function decode(value: HranaValue): InValue {
  switch (value.type) {
    case "null":
      return null;
    case "integer": {
      // The native driver binds numbers; every integer the gateway writes is a safe one.
      const n = Number(value.value);
      return Number.isSafeInteger(n) ? n : BigInt(value.value);
    }
    case "float":
      return value.value;
    case "text":
      return value.value;
    case "blob":
      return Uint8Array.from(atob(value.base64), (c) => c.charCodeAt(0));
  }
}

function encode(value: unknown): HranaValue {
  if (value === null || value === undefined) return { type: "null" };
  if (typeof value === "bigint") return { type: "integer", value: String(value) };
  if (typeof value === "number") {
    return Number.isInteger(value)
      ? { type: "integer", value: String(value) }
      : { type: "float", value };
  }
  if (typeof value === "string") return { type: "text", value };
  const bytes = new Uint8Array(value as ArrayBuffer);
  return { type: "blob", base64: btoa(String.fromCharCode(...bytes)) };
}

function hranaError(err: unknown): { message: string; code?: string } {
  const code = err instanceof Error && "code" in err ? String(err.code) : undefined;
  return { message: err instanceof Error ? err.message : String(err), code };
}
