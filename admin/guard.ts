import type { Context, MiddlewareHandler } from "hono";
import { type AccessDeps, isAdmin } from "../gateway/policy/access.ts";
import { presentedKey } from "../gateway/policy/auth.ts";
import { isJsonContentType } from "../gateway/accept/json_content_type.ts";

/**
 * The admin API's gate: the admin token (or loopback with no token set), with a refusal that
 * says what is wrong, so the login form can show it. The token itself is never echoed or logged.
 */
export function adminGuard(deps: AccessDeps): MiddlewareHandler {
  return async (c: Context, next) => {
    if (isAdmin(c.req.raw, deps)) return await next();
    return c.json(
      { error: refusal(c.req.raw, deps) },
      401,
      { "www-authenticate": 'Bearer realm="pulsegate admin"' },
    );
  };
}

/** The code `admin.closed` tells the page no token can help: the operator must set one. */
function refusal(request: Request, deps: AccessDeps): { code: string; message: string } {
  if (!deps.adminToken) {
    return {
      code: "admin.closed",
      message: "the gateway has no admin token (PULSEGATE_ADMIN_TOKEN) and does not listen on " +
        "loopback only, so the admin API is closed",
    };
  }
  const message = presentedKey(request.headers) === null
    ? "admin token required"
    : "wrong admin token";
  return { code: "control.unauthorized", message };
}

/**
 * Changes must be sent as JSON. Besides saying what the API expects, this makes every change a
 * CORS-preflighted request, so another site open in the operator's browser cannot post one to
 * a loopback gateway that runs without a token (the cross-site check in
 * gateway/accept/origin_check.ts refuses those too). A DELETE carries no body and is
 * preflighted whatever its headers, so it needs no type.
 */
export function requireJson(): MiddlewareHandler {
  return async (c: Context, next) => {
    if (["GET", "HEAD", "DELETE"].includes(c.req.method)) return await next();
    if (isJsonContentType(c.req.header("content-type") ?? null)) return await next();
    return c.json(
      { error: { code: "admin.json_required", message: "send the body as application/json" } },
      415,
    );
  };
}
