import { z } from "zod";
import type { LiveSort, LiveState } from "./api_types.ts";

/**
 * The live list's page size: the default and the most one page holds. An open tab's cost (bytes
 * per tick, rendering) follows the page, not the number of running requests (docs/admin.md
 * "Live requests", docs/scaling.md "The live list of a fleet").
 */
export const LIVE_PAGE_MAX = 100;
/** The longest search text: ids are 36 characters; anything much longer is not a search. */
export const LIVE_SEARCH_MAX_CHARS = 200;
/** The longest value of any other filter (route, upstream, session, key, instance). */
export const LIVE_FILTER_MAX_CHARS = 256;

const STATES = [
  "waiting_for_slot",
  "waiting_for_headers",
  "holding",
  "streaming",
  "finishing",
] as const satisfies readonly LiveState[];

/** Where a page starts: after the row with this order key. */
export interface LiveCursor {
  rank: number;
  instance: string;
  id: string;
}

/** A page of the live list asked for; a filter left out lets everything through. */
export interface LiveQuery {
  route?: string;
  upstream?: string;
  state?: LiveState;
  /** Part of a session id. */
  session?: string;
  /** A gateway key's id. */
  key?: string;
  instance?: string;
  /** Part of a request id, session id or key id. */
  q?: string;
  sort: LiveSort;
  after?: LiveCursor;
  limit: number;
}

// `<rank>.<instance>.<id>`: the rank is an integer, an instance id is hex, the id is the rest.
const CURSOR = /^(-?\d{1,16})\.([0-9a-z]{1,64})\.([\s\S]{1,512})$/;

export function formatCursor(cursor: LiveCursor): string {
  return `${cursor.rank}.${cursor.instance}.${cursor.id}`;
}

export function parseCursor(text: string): LiveCursor | null {
  const m = CURSOR.exec(text);
  if (!m) return null;
  return { rank: Number(m[1]), instance: m[2]!, id: m[3]! };
}

const filter = z.string().max(LIVE_FILTER_MAX_CHARS).optional()
  .transform((v) => v === "" ? undefined : v);

/**
 * The query's text form: the URL parameters of GET /admin/api/live(/snapshot), and the `query`
 * of a peer's signed call, which carries the same parameters.
 */
const QuerySchema = z.object({
  route: filter,
  upstream: filter,
  state: z.enum([...STATES, ""]).optional().transform((v) => v === "" ? undefined : v),
  session: filter,
  key: filter,
  instance: filter,
  q: z.string().max(LIVE_SEARCH_MAX_CHARS).optional()
    .transform((v) => v?.trim() === "" ? undefined : v?.trim()),
  sort: z.enum(["oldest", "newest", "idle"]).default("oldest"),
  after: z.string().max(600).optional(),
  limit: z.string().regex(/^\d{1,4}$/).optional(),
});

export type QueryParsed = { ok: true; query: LiveQuery } | { ok: false; message: string };

/** Reads a query from its text form; says what is wrong with one that is not. */
export function parseLiveQuery(params: Record<string, string>): QueryParsed {
  const parsed = QuerySchema.safeParse(params);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const at = issue?.path.join(".") || "query";
    return { ok: false, message: `${at}: ${issue?.message ?? "invalid"}` };
  }
  const { after, limit, ...rest } = parsed.data;
  const size = limit === undefined ? LIVE_PAGE_MAX : Number(limit);
  if (size < 1 || size > LIVE_PAGE_MAX) {
    return { ok: false, message: `limit: a page holds 1 to ${LIVE_PAGE_MAX} rows` };
  }
  const cursor = after ? parseCursor(after) : undefined;
  if (cursor === null) return { ok: false, message: "after: not a cursor this list gave" };
  const query: LiveQuery = { sort: rest.sort, limit: size };
  for (const name of ["route", "upstream", "session", "key", "instance", "q"] as const) {
    const value = rest[name];
    if (value !== undefined) query[name] = value;
  }
  if (rest.state !== undefined) query.state = rest.state;
  if (cursor) query.after = cursor;
  return { ok: true, query };
}

/** The text form of a query, as a peer is asked it. */
export function liveQueryParams(query: LiveQuery): Record<string, string> {
  const params: Record<string, string> = { sort: query.sort, limit: String(query.limit) };
  for (const name of ["route", "upstream", "state", "session", "key", "instance", "q"] as const) {
    const value = query[name];
    if (value !== undefined) params[name] = value;
  }
  if (query.after) params.after = formatCursor(query.after);
  return params;
}

/** The URL's parameters as one record (a repeated one: its last value). */
export function paramsOf(url: string): Record<string, string> {
  return Object.fromEntries(new URL(url).searchParams);
}
