/** Helpers shared by the admin page's tests: the token, the live feed, a safe-mode data dir. */
import { openDatabase } from "../db/client.ts";
import { storeConfig } from "../db/config_store.ts";
import { migrate } from "../db/migrate.ts";
import type { LiveSnapshot } from "../admin/api_types.ts";
import { createSseParser } from "../admin/client/sse_parser.ts";
import { postJson, type TestGateway } from "./harness.ts";

export { eventually } from "./harness.ts";

export const ADMIN = "admin-secret";
export const adminHeaders = { authorization: `Bearer ${ADMIN}` };

/** A call to the admin API with the admin token; `body` is sent as JSON. */
export function adminFetch(
  gw: TestGateway,
  path: string,
  opts: { method?: string; body?: unknown; token?: string | null } = {},
): Promise<Response> {
  const headers: Record<string, string> = {};
  const token = opts.token === undefined ? ADMIN : opts.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (opts.body !== undefined) headers["content-type"] = "application/json";
  return fetch(`${gw.url}${path}`, {
    method: opts.method ?? (opts.body === undefined ? "GET" : "POST"),
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
}

/** Reads `snapshot` events of GET /admin/api/live until `until` accepts one, then closes. */
export async function waitForSnapshot(
  gw: TestGateway,
  until: (snapshot: LiveSnapshot) => boolean,
): Promise<LiveSnapshot> {
  const res = await adminFetch(gw, "/admin/api/live");
  if (res.status !== 200 || !res.body) throw new Error(`live feed answered ${res.status}`);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  // A box, not a `let`: the parser's callback sets it, which flow analysis cannot see.
  const found: { snapshot?: LiveSnapshot } = {};
  const parse = createSseParser((event) => {
    if (found.snapshot || event.event !== "snapshot") return;
    const snapshot = JSON.parse(event.data) as LiveSnapshot;
    if (until(snapshot)) found.snapshot = snapshot;
  });
  const deadline = Date.now() + 15_000; // generous for a loaded CI machine; a match returns at once
  try {
    while (!found.snapshot && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      parse(value);
    }
  } finally {
    await reader.cancel();
  }
  if (!found.snapshot) throw new Error("no live snapshot matched in time");
  return found.snapshot;
}

/** A data dir whose stored config is `body`, as a previous run (or an operator) left it. */
export async function dirWithStoredConfig(body: unknown): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-admin-" });
  const db = await openDatabase(`file:${dir}/pulsegate.db`);
  try {
    await migrate(db);
    await storeConfig(db, body, { now: Date.now() });
  } finally {
    db.close();
  }
  return dir;
}

/**
 * Starts a streamed chat request and reads until its first content ("partial") arrived. The rest
 * is read in the background and comes back in an object, since an async function would otherwise
 * wait for the promise it returns.
 */
export async function streamingRequest(
  gw: TestGateway,
  headers: Record<string, string>,
): Promise<{ res: Response; rest: Promise<string> }> {
  const body = { model: "smart", stream: true, messages: [{ role: "user", content: "hi" }] };
  const res = await postJson(`${gw.url}/v1/chat/completions`, body, headers);
  if (res.status !== 200) throw new Error(`stream answered ${res.status}`);
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("partial")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`stream ended early: ${text}`);
    text += value;
  }
  const rest = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return text;
      text += value;
    }
  })();
  return { res, rest };
}
