import type { CostReport, KeysView } from "../../api_types.ts";
import { COST_PERIODS, type CostPeriod, type Costs } from "../cost_model.ts";
import { formatTime } from "../format.ts";
import { formatUsd } from "../money.ts";

export interface CostPanelProps {
  costs: Costs;
  now: () => number;
}

const GROUP_LABELS: Record<CostReport["by"], string> = {
  route: "Route",
  key: "Key",
  upstream: "Upstream",
};

/** Spend over a chosen period by route, key and upstream, and each key against its limits. */
export function CostPanel({ costs, now }: CostPanelProps) {
  const reports = costs.reports.value;
  return (
    <section aria-labelledby="costs-title">
      <header class="panel-head">
        <h2 id="costs-title">Cost</h2>
        <label>
          Period
          <select
            name="cost-period"
            value={costs.period.value}
            onChange={(e) => void costs.choose(e.currentTarget.value as CostPeriod)}
          >
            {Object.entries(COST_PERIODS).map(([id, p]) => (
              <option key={id} value={id}>{p.label}</option>
            ))}
          </select>
        </label>
        <button type="button" class="quiet" onClick={() => costs.refresh()}>Refresh</button>
      </header>
      {costs.error.value && <p class="notice error" role="alert">{costs.error.value}</p>}
      <p class="empty">
        Costs come from the upstreams' <code>prices</code>{" "}
        in the config; a model without a price shows —.
      </p>
      {reports?.map((report) => <Totals key={report.by} report={report} />)}
      {costs.keys.value && <KeyUse view={costs.keys.value} now={now()} />}
    </section>
  );
}

function Totals({ report }: { report: CostReport }) {
  const label = GROUP_LABELS[report.by];
  if (report.totals.length === 0) {
    return <p class="empty">No request in this period (by {label.toLowerCase()}).</p>;
  }
  return (
    <table class="cards costs" data-cost-by={report.by}>
      <caption>By {label.toLowerCase()}</caption>
      <thead>
        <tr>
          <th scope="col">{label}</th>
          <th scope="col">Requests</th>
          <th scope="col">Input tokens</th>
          <th scope="col">Output tokens</th>
          <th scope="col">Cost</th>
        </tr>
      </thead>
      <tbody>
        {report.totals.map((t) => (
          <tr key={t.group ?? ""}>
            <td data-label={label}>{t.group ?? <small>none</small>}</td>
            <td data-label="Requests">{t.requests}</td>
            <td data-label="Input tokens">{t.inputTokens}</td>
            <td data-label="Output tokens">{t.outputTokens}</td>
            <td data-label="Cost">{formatUsd(t.costUsd)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function limitCell(used: string | number, limit: number | string | null) {
  return limit === null
    ? (
      <>
        {used} <small>no limit</small>
      </>
    )
    : <>{used} / {limit}</>;
}

function KeyUse({ view, now }: { view: KeysView; now: number }) {
  if (view.keys.length === 0) return <p class="empty">No gateway key is configured.</p>;
  return (
    <table class="cards key-use">
      <caption>Keys against their limits</caption>
      <thead>
        <tr>
          <th scope="col">Key</th>
          <th scope="col">Requests, last 60 s</th>
          <th scope="col">Tokens, last 60 s</th>
          <th scope="col">Spent this period</th>
        </tr>
      </thead>
      <tbody>
        {view.keys.map((k) => (
          <tr key={k.id} data-key={k.id}>
            <td data-label="Key">
              <strong>{k.id}</strong>
              {!k.enabled && <small>disabled</small>}
            </td>
            {k.use
              ? (
                <>
                  <td data-label="Requests, last 60 s">
                    {limitCell(k.use.requestsLastMinute, k.rpm)}
                  </td>
                  <td data-label="Tokens, last 60 s">
                    {limitCell(k.use.tokensLastMinute, k.tpm)}
                  </td>
                  <td data-label="Spent this period">
                    {limitCell(formatUsd(k.use.spentUsd), k.budget && formatUsd(k.budget.usd))}
                    <small>
                      {k.budget ? `per UTC ${k.budget.period}` : "today (UTC)"}, renews{" "}
                      {formatTime(k.use.periodEndsAt, { now })}
                    </small>
                  </td>
                </>
              )
              : <td colSpan={3}>no limits, so not metered (its spend is in the tables above)</td>}
          </tr>
        ))}
      </tbody>
    </table>
  );
}
