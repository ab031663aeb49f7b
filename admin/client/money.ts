/** USD as the admin page shows it: cents above a dollar, more digits for the small sums of one request. */
export function formatUsd(usd: number | null | undefined): string {
  if (usd === null || usd === undefined) return "—";
  if (usd === 0) return "$0";
  if (Math.abs(usd) >= 1) return `$${usd.toFixed(2)}`;
  return `$${usd.toPrecision(3).replace(/0+$/, "").replace(/\.$/, "")}`;
}
