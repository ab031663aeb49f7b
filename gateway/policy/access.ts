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
