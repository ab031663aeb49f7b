import { configKey } from "../config/config_keys.ts";
import type { Config, GatewayKey } from "../config/schema.ts";
import { type Billed, type Billing, billingFor } from "../live/billing.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import type { KeyUsageRow } from "../../db/key_usage_store.ts";
import type { KeyUsageMeter } from "./key_usage_meter.ts";
import { budgetPeriod, slidingUse } from "./usage_windows.ts";
import { onePer } from "../runtime/memo.ts";

/** A key's use against its limits (admin page, and the checks below). */
export interface KeyUse {
  requestsLastMinute: number;
  tokensLastMinute: number;
  /** Spent in the budget's current period; the current UTC day when there is no budget. */
  spentUsd: number;
  periodEndsAt: number;
}

interface Verdict {
  use: KeyUse;
  refusal: GatewayError | null;
}

function judge(key: GatewayKey, opts: { rows: KeyUsageRow[]; now: number }): Verdict {
  const { rows, now } = opts;
  const seconds = rows.filter((r) => r.kind === "second");
  const requests = slidingUse(seconds.map((r) => ({ start: r.start, value: r.requests })), {
    now,
    limit: key.rpm,
  });
  const tokens = slidingUse(seconds.map((r) => ({ start: r.start, value: r.tokens })), {
    now,
    limit: key.tpm,
  });
  const period = budgetPeriod(key.budget?.period ?? "day", now);
  const spentUsd = rows.filter((r) =>
    r.kind === "day" && r.start >= period.from && r.start < period.to
  )
    .reduce((sum, r) => sum + r.costUsd, 0);
  const use = {
    requestsLastMinute: requests.used,
    tokensLastMinute: tokens.used,
    spentUsd,
    periodEndsAt: period.to,
  };
  const retryAfterSecs = (at: number) => Math.max(1, Math.ceil((at - now) / 1_000));
  if (key.budget && spentUsd >= key.budget.usd) {
    const refusal = new GatewayError(
      `key '${key.id}' has spent its budget of ${key.budget.usd} USD for this ` +
        `${key.budget.period} (UTC)`,
      { code: "gw.key.budget_exhausted", retryAfterSecs: retryAfterSecs(period.to) },
    );
    return { use, refusal };
  }
  const over = requests.freesAt !== null
    ? `${key.rpm} requests per minute`
    : tokens.freesAt !== null
    ? `${key.tpm} tokens per minute`
    : null;
  if (over === null) return { use, refusal: null };
  const freesAt = Math.max(requests.freesAt ?? 0, tokens.freesAt ?? 0);
  const refusal = new GatewayError(`key '${key.id}' is over its limit of ${over}`, {
    code: "gw.key.rate_limited",
    retryAfterSecs: retryAfterSecs(freesAt),
  });
  return { use, refusal };
}

function limited(key: GatewayKey): boolean {
  return key.rpm !== undefined || key.tpm !== undefined || key.budget !== undefined;
}

/**
 * Admits a request under its key's rpm, tpm and budget (docs/config.md "Prices and key limits")
 * and counts it; throws the 429 otherwise. The count follows the check with no await between,
 * so concurrent requests in one process cannot all slip under the limit.
 */
export async function admitUnderKeyLimits(
  key: GatewayKey,
  opts: { meter: KeyUsageMeter; now: () => number },
): Promise<void> {
  // A key without limits is not metered: no write on its requests' path.
  if (!limited(key)) return;
  await opts.meter.refresh([key.id]);
  const { refusal } = judge(key, { rows: opts.meter.rows(key.id), now: opts.now() });
  if (refusal) throw refusal;
  opts.meter.add(key.id, { requests: 1 });
}

/** Each metered key's current use, read fresh enough for the admin page; null when unmetered. */
export async function keyUses(
  keys: readonly GatewayKey[],
  opts: { meter: KeyUsageMeter; now: () => number },
): Promise<Map<string, KeyUse | null>> {
  const metered = keys.filter(limited);
  await opts.meter.refresh(metered.map((k) => k.id));
  const now = opts.now();
  return new Map(keys.map((k) => [
    k.id,
    limited(k) ? judge(k, { rows: opts.meter.rows(k.id), now }).use : null,
  ]));
}

/**
 * The proxy's two hooks: a request's billing (hop prices, and each billed hop counted against
 * its key when the key has limits) and the admission check, which passes when there is no key,
 * no limit or no meter.
 */
export function meteredBilling(
  config: Config,
  opts: { keyId: string | null; meter?: KeyUsageMeter },
): Billing {
  const { keyId, meter } = opts;
  const key = configKey(config, keyId);
  if (!key || !limited(key) || !meter) return plainBilling(config);
  return billingFor(config, { onBilled: (billed) => meter.add(key.id, billedUse(billed)) });
}

/** Billing with no meter to tell keeps no state of its own: one per config serves every request. */
const plainBilling = onePer((config: Config) => billingFor(config));

function billedUse(billed: Billed) {
  return { tokens: billed.tokens, costUsd: billed.costUsd ?? 0 };
}

/** The admission check of a request under its key; null when there is nothing to check. */
export function admitKey(
  config: Config,
  opts: { keyId: string | null; meter?: KeyUsageMeter; now: () => number },
): Promise<void> | null {
  if (opts.keyId === null || !opts.meter) return null;
  const key = configKey(config, opts.keyId);
  // A key without limits is not metered: no await on its requests' path either.
  if (!key || !limited(key)) return null;
  return admitUnderKeyLimits(key, { meter: opts.meter, now: opts.now });
}
