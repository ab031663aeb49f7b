import { type Context, Hono } from "hono";
import type { AbortRegistry } from "../gateway/live/abort_registry.ts";
import { peerScope, SeenSignatures } from "../gateway/live/peer_scope.ts";
import type { Config } from "../gateway/config/schema.ts";
import type { Clock } from "../gateway/runtime/clock.ts";
import { isRecord } from "../gateway/runtime/json.ts";
import type { Logger } from "../gateway/runtime/logger.ts";
import type { LiveSnapshot } from "./api_types.ts";
import { historyChoices } from "./history_api.ts";

import { liveEvents } from "./live_events.ts";
import { LIVE_PEER_PATH, type LiveFleet } from "./live_fleet.ts";
import { mergeParts } from "./live_merge.ts";
import { livePart } from "./live_part.ts";
import { type LiveQuery, paramsOf, parseLiveQuery } from "./live_query.ts";

/**
 * How many live feeds (open admin tabs) one process serves at once. Each costs a page's work
 * every tick and, in a fleet, a call to every peer; a dozen operators' tabs fit well within it.
 */
export const LIVE_FEEDS_MAX = 32;

export interface LiveApiDeps {
  registry: AbortRegistry;
  clock: Clock;
  instanceId: string;
  config: () => Config | null;
  stopping: () => boolean;
  fleet: LiveFleet;
  /** `PULSEGATE_PEER_SECRET`: what a peer's call for a page must be signed with. */
  peerSecret?: string;
  log?: Logger;
}

/**
 * The live list's API (docs/admin.md "Live requests"): the tab's feed and one page as JSON,
 * behind the admin guard, and the signed call by which the other instances ask this one for
 * its share of a page (docs/scaling.md "The live list of a fleet").
 */
export function liveApi(deps: LiveApiDeps): Hono {
  const app = new Hono();
  let feeds = 0;
  const page = async (query: LiveQuery, signal: AbortSignal): Promise<LiveSnapshot> => {
    const own = livePart(deps.registry.all(), {
      query,
      now: deps.clock.now(),
      instance: deps.instanceId,
    });
    const fleet = await deps.fleet.ask(query, { signal });
    return mergeParts([own, ...fleet.parts], {
      query,
      at: deps.clock.now(),
      instances: [deps.instanceId, ...fleet.peers],
      silent: fleet.silent,
      choices: liveChoices(deps.config()),
    });
  };
  app.get("/admin/api/live", (c) => {
    const parsed = parseLiveQuery(paramsOf(c.req.url));
    if (!parsed.ok) return badQuery(c, parsed.message);
    if (feeds >= LIVE_FEEDS_MAX) {
      return c.json(
        {
          error: {
            code: "admin.live_feeds_full",
            message: `this instance serves ${LIVE_FEEDS_MAX} live feeds at once; close a tab`,
          },
        },
        503,
        { "retry-after": "5" },
      );
    }
    feeds++;
    const { query } = parsed;
    return new Response(
      liveEvents({
        clock: deps.clock,
        snapshot: (signal) => page(query, signal),
        stopping: deps.stopping,
        signal: c.req.raw.signal,
        onEnd: () => feeds--,
        log: deps.log,
      }),
      {
        headers: {
          "content-type": "text/event-stream; charset=utf-8",
          "cache-control": "no-cache, no-transform",
          "x-accel-buffering": "no",
        },
      },
    );
  });
  // One page as plain JSON, for scripts and curl.
  app.get("/admin/api/live/snapshot", async (c) => {
    const parsed = parseLiveQuery(paramsOf(c.req.url));
    if (!parsed.ok) return badQuery(c, parsed.message);
    return c.json(await page(parsed.query, c.req.raw.signal));
  });
  const seen = new SeenSignatures();
  app.post(LIVE_PEER_PATH, async (c) => {
    const call = await peerScope(c.req.raw, {
      secret: deps.peerSecret,
      now: deps.clock.now(),
      seen,
      self: deps.instanceId,
    });
    // Live data is the operator's: only a call made for the admin token's holder is answered.
    if (!call || !call.scope.admin) {
      return c.json({
        error: { code: "control.unauthorized", message: "a signed instance call is required" },
      }, 401);
    }
    const params = call.body?.query;
    const parsed = isRecord(params) && Object.values(params).every((v) => typeof v === "string")
      ? parseLiveQuery(params as Record<string, string>)
      : { ok: false as const, message: "query: expected the page's parameters" };
    if (!parsed.ok) return badQuery(c, parsed.message);
    return c.json(livePart(deps.registry.all(), {
      query: parsed.query,
      now: deps.clock.now(),
      instance: deps.instanceId,
    }));
  });
  return app;
}

function badQuery(c: Context, message: string): Response {
  return c.json({ error: { code: "admin.bad_query", message } }, 400);
}

/** What the route and upstream filters offer: the configured ones, as history's filters do. */
function liveChoices(config: Config | null): LiveSnapshot["choices"] {
  const { routes, upstreams } = historyChoices(config);
  return { routes, upstreams };
}
