/**
 * The latency-against-load chart of scenario 2, drawn from the run's own figures: requests/s
 * achieved (x) against p99 latency (y, log scale), one line per target, one point per
 * concurrency level, and the 50 ms bound dashed.
 */
import type { ThroughputResult } from "../results.ts";
import type { TargetId } from "../targets.ts";

const W = 760;
const H = 440;
const M = { left: 64, right: 200, top: 36, bottom: 52 };
const COLORS: Record<TargetId, string> = {
  direct: "#888888",
  floor: "#1f77b4",
  floor_js: "#9edae5",
  pulsegate: "#d62728",
  pulsegate_no_history: "#ff9896",
  portkey: "#2ca02c",
};

/** Ticks at 1, 2 and 5 of each decade from `min` to `max`, for a log axis. */
function logTicks(min: number, max: number): number[] {
  const ticks: number[] = [];
  for (let decade = min; decade <= max; decade *= 10) {
    for (const k of [1, 2, 5]) if (decade * k <= max) ticks.push(decade * k);
  }
  return ticks;
}

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

export function latencyChart(s: ThroughputResult): string {
  const points = s.rows.flatMap((r) => r.levels.filter((l) => l.p99Ms > 0));
  // Log on both axes: the loads span 40 to 10,000 req/s and the knees sit at the low end.
  const xMin = 10;
  const top = Math.max(100, ...points.map((l) => l.rps)) * 1.1;
  const xMax = logTicks(xMin, 10 * top).find((t) => t >= top) ?? top;
  const yMin = 10;
  const yMax = 10 ** Math.ceil(Math.log10(Math.max(s.boundMs * 2, ...points.map((l) => l.p99Ms))));
  const plotW = W - M.left - M.right;
  const plotH = H - M.top - M.bottom;
  const x = (rps: number) =>
    M.left + (Math.log10(Math.max(xMin, rps) / xMin) / Math.log10(xMax / xMin)) * plotW;
  const y = (ms: number) => {
    const clamped = Math.min(yMax, Math.max(yMin, ms));
    return M.top + plotH - (Math.log10(clamped / yMin) / Math.log10(yMax / yMin)) * plotH;
  };
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" ` +
    `font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="#ffffff"/>`,
    `<text x="${M.left}" y="20" font-size="14" font-weight="bold">p99 latency against load ` +
    `(fake upstream answers in ${s.upstreamDelayMs} ms; concurrency 1 to 256)</text>`,
  ];
  for (const v of logTicks(xMin, xMax)) {
    out.push(
      `<line x1="${x(v)}" y1="${M.top}" x2="${x(v)}" y2="${M.top + plotH}" stroke="#eeeeee"/>`,
      `<text x="${x(v)}" y="${M.top + plotH + 16}" text-anchor="middle">${Math.round(v)}</text>`,
    );
  }
  for (const ms of logTicks(yMin, yMax)) {
    out.push(
      `<line x1="${M.left}" y1="${y(ms)}" x2="${M.left + plotW}" y2="${y(ms)}" stroke="#eeeeee"/>`,
      `<text x="${M.left - 6}" y="${y(ms) + 4}" text-anchor="end">${ms}</text>`,
    );
  }
  out.push(
    `<rect x="${M.left}" y="${M.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#999"/>`,
    `<text x="${M.left + plotW / 2}" y="${
      H - 12
    }" text-anchor="middle">requests/s achieved (log)</text>`,
    `<text x="16" y="${M.top + plotH / 2}" text-anchor="middle" ` +
      `transform="rotate(-90 16 ${M.top + plotH / 2})">p99 latency, ms (log)</text>`,
    `<line x1="${M.left}" y1="${y(s.boundMs)}" x2="${M.left + plotW}" y2="${y(s.boundMs)}" ` +
      `stroke="#000" stroke-dasharray="6 4"/>`,
    `<text x="${M.left + plotW - 4}" y="${
      y(s.boundMs) - 4
    }" text-anchor="end">${s.boundMs} ms bound</text>`,
  );
  s.rows.forEach((r, i) => {
    const color = COLORS[r.target];
    const pts = r.levels.filter((l) => l.p99Ms > 0);
    const path = pts.map((l) => `${x(l.rps).toFixed(1)},${y(l.p99Ms).toFixed(1)}`).join(" ");
    out.push(`<polyline points="${path}" fill="none" stroke="${color}" stroke-width="2"/>`);
    for (const l of pts) {
      const title = `${esc(r.label)}: c=${l.concurrency}, ${Math.round(l.rps)} req/s, ` +
        `p99 ${l.p99Ms} ms${l.errors ? `, ${l.errors} errors` : ""}`;
      out.push(
        `<circle cx="${x(l.rps).toFixed(1)}" cy="${y(l.p99Ms).toFixed(1)}" r="3" fill="${color}">` +
          `<title>${title}</title></circle>`,
      );
    }
    const ly = M.top + 10 + i * 20;
    const lx = M.left + plotW + 14;
    out.push(
      `<line x1="${lx}" y1="${ly}" x2="${lx + 20}" y2="${ly}" stroke="${color}" stroke-width="3"/>`,
      `<text x="${lx + 26}" y="${ly + 4}">${esc(r.label)}</text>`,
    );
  });
  out.push("</svg>");
  return out.join("\n") + "\n";
}
