import type { ErrorHandler } from "hono";

/**
 * Admin endpoints that read stored state fail while there is no database (none on this platform,
 * or a remote one away): answered 503 with the reason (docs/deploy.md) instead of a bare 500. Any
 * other error is answered as Hono would.
 */
export function databaseErrorHandler(notice: () => string | null): ErrorHandler {
  return (err, c) => {
    if ("getResponse" in err && typeof err.getResponse === "function") {
      return err.getResponse() as Response;
    }
    const why = notice();
    if (why !== null) {
      return c.json({ error: { code: "admin.database_unavailable", message: why } }, 503);
    }
    console.error(err);
    return c.text("Internal Server Error", 500);
  };
}
