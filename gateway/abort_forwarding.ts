import type { Db } from "../db/client.ts";
import { findRequestOwner, findSessionOwners, type Owner } from "../db/live_owners.ts";
import type { Clock } from "./clock.ts";
import { ERROR_CODE_HEADER } from "./gateway_error.ts";
import { staleAfterMs } from "./instance_heartbeat.ts";

/** Marks an abort already forwarded once, so two instances never bounce it. */
export const FORWARDED_HEADER = "x-pulsegate-forwarded";

export interface ForwardingDeps {
  db: Db;
  instanceId: string;
  clock: Clock;
  fetch: typeof fetch;
}

export function isForwarded(request: Request): boolean {
  return request.headers.has(FORWARDED_HEADER);
}

/**
 * SPEC §11: each process knows only its own live requests. An abort for a
 * request another live instance owns is sent on to that instance, with the
 * caller's credentials, and its answer is returned as is.
 */
export async function forwardRequestAbort(
  id: string,
  opts: { request: Request; deps: ForwardingDeps },
): Promise<Response | null> {
  const owner = await findRequestOwner(opts.deps.db, id, ownerQuery(opts.deps)).catch(() => null);
  if (!owner) return null;
  return await send(owner, { path: `/request/${encodeURIComponent(id)}/abort`, ...opts });
}

/** The request ids other instances stopped for a session abort. */
export async function forwardSessionAbort(
  sessionId: string,
  opts: { request: Request; deps: ForwardingDeps },
): Promise<string[]> {
  const owners = await findSessionOwners(opts.deps.db, sessionId, ownerQuery(opts.deps))
    .catch(() => []);
  const path = `/sessions/${encodeURIComponent(sessionId)}/abort`;
  const stopped = await Promise.all(owners.map(async (owner) => {
    const res = await send(owner, { path, ...opts });
    if (!res.ok) return [];
    const body: unknown = await res.json().catch(() => null);
    const ids = body && typeof body === "object" && "requests" in body ? body.requests : [];
    return Array.isArray(ids) ? ids.filter((x): x is string => typeof x === "string") : [];
  }));
  return stopped.flat();
}

function ownerQuery(deps: ForwardingDeps) {
  return { self: deps.instanceId, liveSince: deps.clock.now() - staleAfterMs(deps.clock) };
}

async function send(
  owner: Owner,
  opts: { path: string; request: Request; deps: ForwardingDeps },
): Promise<Response> {
  const headers = new Headers({ [FORWARDED_HEADER]: "1" });
  for (const name of ["authorization", "x-api-key", "x-goog-api-key"]) {
    const value = opts.request.headers.get(name);
    if (value) headers.set(name, value);
  }
  try {
    const res = await opts.deps.fetch(`${owner.url}${opts.path}`, { method: "POST", headers });
    return new Response(res.body, { status: res.status, headers: res.headers });
  } catch {
    const code = "control.owner_unreachable";
    return Response.json(
      { error: { code, message: `instance ${owner.instanceId} did not answer` } },
      { status: 502, headers: { [ERROR_CODE_HEADER]: code } },
    );
  }
}
