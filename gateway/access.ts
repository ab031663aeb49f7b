import type { Context, MiddlewareHandler } from "hono";
import { presentedKey, safeEqual } from "./auth.ts";

export interface AccessDeps {
  adminToken: string | undefined;
  /** Whether the gateway listens on loopback only. */
  loopback: boolean;
}

/** True when the request carries the admin token, or no token is set and we serve loopback only. */
export function isAdmin(request: Request, deps: AccessDeps): boolean {
  if (!deps.adminToken) return deps.loopback;
  const presented = presentedKey(request.headers);
  return presented !== null && safeEqual(presented, deps.adminToken);
}

/** Guards admin-only routes with a JSON 401. */
export function requireAdmin(deps: AccessDeps): MiddlewareHandler {
  return async (c: Context, next) => {
    if (!isAdmin(c.req.raw, deps)) {
      return c.json(
        { error: { code: "control.unauthorized", message: "admin token required" } },
        401,
      );
    }
    await next();
  };
}
