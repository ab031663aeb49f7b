import { z } from "zod";

/**
 * Which environment variables a config may name. The gateway's own settings live under
 * `PULSEGATE_` (the admin token, the database URL and its token): a config that could name them
 * as an upstream's key would send them to whatever `base_url` it points at. So no `*_env` field
 * may name a `PULSEGATE_` variable, except that gateway keys (`key_env`, only ever compared,
 * never sent) may use `PULSEGATE_KEY_*` (docs/security.md).
 */
const GATEWAY_PREFIX = "PULSEGATE_";
const GATEWAY_KEY_PREFIX = "PULSEGATE_KEY_";

/** True when `name` is free for this field; env names are matched case-blind, as on Windows. */
export function allowedEnvName(name: string, opts: { gatewayKey?: boolean } = {}): boolean {
  const upper = name.toUpperCase();
  if (!upper.startsWith(GATEWAY_PREFIX)) return true;
  return opts.gatewayKey === true && upper.startsWith(GATEWAY_KEY_PREFIX);
}

export function refusedEnvMessage(opts: { gatewayKey?: boolean } = {}): string {
  return opts.gatewayKey
    ? "may not name one of the gateway's own PULSEGATE_ settings; a gateway key may use " +
      "PULSEGATE_KEY_<NAME> or any name outside PULSEGATE_"
    : "may not name a PULSEGATE_ variable: those hold the gateway's own settings and secrets " +
      "(admin token, database token), which an upstream or destination would be sent";
}

/** A config field holding the NAME of an environment variable (never the secret itself). */
export function envNameField(opts: { gatewayKey?: boolean } = {}) {
  return z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, {
    error: "must be the NAME of an environment variable (letters, digits and _, not starting " +
      "with a digit), e.g. OPENAI_API_KEY; never the secret itself",
  }).refine((name) => allowedEnvName(name, opts), { error: refusedEnvMessage(opts) });
}
