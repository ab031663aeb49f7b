import assert from "node:assert/strict";
import { renderToString } from "preact-render-to-string";
import { type AdminApi, ApiFailure } from "../admin/client/api.ts";
import { COST_PERIODS, createCosts } from "../admin/client/cost_model.ts";
import { CostPanel } from "../admin/client/islands/costs.tsx";
import { formatUsd } from "../admin/client/money.ts";
import type { CostReport, KeysView } from "../admin/api_types.ts";
import { parseCostQuery } from "../admin/costs_api.ts";

const NOW = Date.UTC(2026, 11, 1, 12);

const KEYS: KeysView = {
  keys: [{
    id: "app1",
    enabled: true,
    rpm: 60,
    tpm: null,
    budget: { usd: 10, period: "month" },
    use: {
      requestsLastMinute: 7,
      tokensLastMinute: 1234,
      spentUsd: 2.5,
      periodEndsAt: Date.UTC(2027, 0, 1),
    },
  }, { id: "open", enabled: true, rpm: null, tpm: null, budget: null, use: null }],
};

function fakeApi(asked: { by: string; since: number }[]): AdminApi {
  const api: Partial<AdminApi> = {
    costs: (query) => {
      asked.push(query);
      const report: CostReport = {
        ...query,
        until: NOW,
        totals: [{
          group: `${query.by}-1`,
          requests: 3,
          inputTokens: 300,
          outputTokens: 30,
          costUsd: 0.0042,
        }],
      };
      return Promise.resolve(report);
    },
    keys: () => Promise.resolve(KEYS),
  };
  return api as AdminApi;
}

Deno.test("cost model: each period asks every grouping from now minus the period", async () => {
  const asked: { by: string; since: number }[] = [];
  const costs = createCosts(fakeApi(asked), { now: () => NOW });
  await costs.refresh();
  assert.deepEqual(
    asked,
    ["route", "key", "upstream"].map((by) => ({
      by,
      since: NOW - COST_PERIODS.day.ms,
    })),
  );
  await costs.choose("hour");
  assert.equal(asked.at(-1)?.since, NOW - 3_600_000);
  assert.equal(costs.reports.value?.length, 3);

  const html = renderToString(<CostPanel costs={costs} now={() => NOW} />);
  assert.match(html, /By route/);
  assert.match(html, /upstream-1/);
  assert.match(html, /\$0\.0042/);
  assert.match(html, /7 \/ 60/, "requests against rpm");
  assert.match(html, /1234 <small>no limit/, "tokens with no tpm");
  assert.match(html, /\$2\.50 \/ \$10\.00/, "spent against the budget");
  assert.match(html, /data-key="open".*no limits, so not metered/);
  costs.clear();
  assert.equal(costs.reports.value, null);
});

Deno.test("cost panel: a period too large to read shows the gateway's message in place of the totals", async () => {
  const asked: { by: string; since: number }[] = [];
  const api = fakeApi(asked);
  const costs = createCosts(api, { now: () => NOW });
  await costs.refresh();
  assert.equal(costs.reports.value?.length, 3);
  const message = "This query is too large: it read history for longer than its bound of " +
    "5000 ms and was stopped. Choose a shorter period (a later `since`, or an `until`).";
  api.costs = () =>
    Promise.reject(
      new ApiFailure(message, { status: 503, code: "admin.query_too_large", problems: [] }),
    );
  await costs.choose("month");
  assert.equal(costs.reports.value, null, "the day's totals do not stand in for the month's");
  const html = renderToString(<CostPanel costs={costs} now={() => NOW} />);
  assert.match(html, /role="alert">This query is too large/);
  assert.match(html, /a later `since`/);
  assert.doesNotMatch(html, /By route/);
});

Deno.test("formatUsd: cents above a dollar, three significant digits below", () => {
  assert.equal(formatUsd(null), "—");
  assert.equal(formatUsd(0), "$0");
  assert.equal(formatUsd(12.345), "$12.35");
  assert.equal(formatUsd(0.0014), "$0.0014");
  assert.equal(formatUsd(0.123456), "$0.123");
});

Deno.test("costs query: by, since and until checked; a day back by default", () => {
  const ok = parseCostQuery(new URLSearchParams("by=upstream&since=5&until=10"), NOW);
  assert.deepEqual(ok, { ok: true, report: { by: "upstream", since: 5, until: 10 } });
  const dflt = parseCostQuery(new URLSearchParams(), NOW);
  assert.deepEqual(dflt, {
    ok: true,
    report: { by: "route", since: NOW - 86_400_000, until: NOW + 1 },
  });
  assert.equal(parseCostQuery(new URLSearchParams("by=model"), NOW).ok, false);
  assert.equal(parseCostQuery(new URLSearchParams("since=yesterday"), NOW).ok, false);
  assert.equal(parseCostQuery(new URLSearchParams("since=10&until=10"), NOW).ok, false);
});
