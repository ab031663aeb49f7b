import type { Config, GatewayKey } from "../config/schema.ts";

/** The credential a client SDK sends, whichever header its SDK uses (docs/design.md "Client API"). */
export function presentedKey(headers: Headers): string | null {
  const bearer = headers.get("authorization");
  if (bearer?.toLowerCase().startsWith("bearer ")) return bearer.slice(7).trim();
  return headers.get("x-api-key") ?? headers.get("x-goog-api-key") ?? null;
}

/** Constant-time string comparison, so a token can't be guessed byte by byte. */
export function safeEqual(a: string, b: string): boolean {
  const x = new TextEncoder().encode(a);
  const y = new TextEncoder().encode(b);
  let diff = x.length ^ y.length;
  for (let i = 0; i < Math.max(x.length, y.length); i++) diff |= (x[i] ?? 0) ^ (y[i] ?? 0);
  return diff === 0;
}

/** The enabled gateway key matching the presented secret, if any. */
export function findKey(
  config: Config,
  opts: { presented: string | null; env: (name: string) => string | undefined },
): GatewayKey | null {
  if (!opts.presented) return null;
  let found: GatewayKey | null = null;
  for (const key of config.keys) {
    const secret = opts.env(key.key_env);
    // Every key is compared, so timing does not reveal which one matched.
    if (key.enabled && secret && safeEqual(secret, opts.presented)) found = key;
  }
  return found;
}
