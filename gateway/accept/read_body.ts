import type { Clock } from "../runtime/clock.ts";
import { readBodyBytes } from "./body_bytes.ts";
import { parseRequestBody } from "../formats/json_guard.ts";

/** docs/design.md "Client API": the default limit on a request body. */
export const BODY_LIMIT_BYTES = 32 * 1024 * 1024;

/**
 * Reads a JSON body with a size limit and a deadline (`readBodyBytes`, docs/security.md
 * "Request bodies and per-key concurrency"), then parses it under the depth and size guard
 * (formats/json_guard.ts, docs/security.md "Deep JSON").
 */
export async function readJsonBody(
  request: Request,
  opts: { limit?: number; signal: AbortSignal; clock?: Clock },
): Promise<unknown> {
  const limit = opts.limit ?? BODY_LIMIT_BYTES;
  const bytes = await readBodyBytes(request, { limit, signal: opts.signal, clock: opts.clock });
  return await parseRequestBody(bytes);
}
