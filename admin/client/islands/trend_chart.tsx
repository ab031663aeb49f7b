import { formatClock } from "../format.ts";

export interface Series {
  name: string;
  /** CSS class giving the colour. */
  cls: string;
  values: (number | null)[];
}

const WIDTH = 320;
const HEIGHT = 140;
const LEFT = 46;
const RIGHT = 6;
const TOP = 8;
const BOTTOM = 20;

/**
 * A small chart drawn by the page itself: stacked bars (counts that add up, like requests by
 * outcome) or lines (values that do not, like p50 and p95), one point per bucket of `times`.
 */
export function TrendChart(
  props: {
    title: string;
    kind: "bars" | "lines";
    times: number[];
    bucketMs: number;
    series: Series[];
    format: (value: number) => string;
  },
) {
  const { times, series, kind } = props;
  const totals = times.map((_, i) =>
    kind === "bars"
      ? series.reduce((n, s) => n + (s.values[i] ?? 0), 0)
      : Math.max(0, ...series.map((s) => s.values[i] ?? 0))
  );
  const peak = Math.max(...totals, 0);
  const top = peak > 0 ? peak : 1;
  const plotW = WIDTH - LEFT - RIGHT;
  const plotH = HEIGHT - TOP - BOTTOM;
  const step = plotW / Math.max(1, times.length);
  const x = (i: number) => LEFT + i * step;
  const y = (v: number) => TOP + plotH - (v / top) * plotH;
  const peakAt = totals.indexOf(peak);
  const summary = peak > 0
    ? `${props.title}: peak ${props.format(peak)} at ${formatClock(times[peakAt] ?? 0)}`
    : `${props.title}: nothing in this window`;
  const label = (i: number, v: number, s: Series) =>
    `${formatClock(times[i] ?? 0)} · ${s.name}: ${props.format(v)}`;
  return (
    <figure class="chart" data-chart={props.title}>
      <figcaption>
        <strong>{props.title}</strong>
        <span class="legend">
          {series.map((s) => <span key={s.name} class={`key ${s.cls}`}>{s.name}</span>)}
        </span>
      </figcaption>
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-label={summary}>
        <g class="axis">
          <line x1={LEFT} x2={WIDTH - RIGHT} y1={y(0)} y2={y(0)} />
          <line x1={LEFT} x2={WIDTH - RIGHT} y1={y(top)} y2={y(top)} class="grid" />
          <text x={LEFT - 4} y={y(top) + 4} text-anchor="end">{props.format(top)}</text>
          <text x={LEFT - 4} y={y(0)} text-anchor="end">0</text>
          <text x={LEFT} y={HEIGHT - 4}>{formatClock(times[0] ?? 0)}</text>
          <text x={WIDTH - RIGHT} y={HEIGHT - 4} text-anchor="end">
            {formatClock((times.at(-1) ?? 0) + props.bucketMs)}
          </text>
        </g>
        {kind === "bars"
          ? times.map((_, i) => {
            let base = 0;
            return series.map((s) => {
              const v = s.values[i] ?? 0;
              if (v <= 0) return null;
              const rect = (
                <rect
                  key={`${s.cls}-${i}`}
                  class={`seg ${s.cls}`}
                  x={x(i) + step * 0.1}
                  width={step * 0.8}
                  y={y(base + v)}
                  height={y(base) - y(base + v)}
                >
                  <title>{label(i, v, s)}</title>
                </rect>
              );
              base += v;
              return rect;
            });
          })
          : series.map((s) => (
            <g key={s.cls} class={`line ${s.cls}`}>
              <path d={linePath(s.values, { x: (i) => x(i) + step / 2, y })} />
              {s.values.map((v, i) =>
                v === null ? null : (
                  <circle key={i} cx={x(i) + step / 2} cy={y(v)} r={2}>
                    <title>{label(i, v, s)}</title>
                  </circle>
                )
              )}
            </g>
          ))}
      </svg>
    </figure>
  );
}

/** A line through the points, broken where a bucket has no value. */
function linePath(
  values: (number | null)[],
  at: { x: (i: number) => number; y: (v: number) => number },
): string {
  let d = "";
  let pen = false;
  values.forEach((v, i) => {
    if (v === null) {
      pen = false;
      return;
    }
    d += `${pen ? "L" : "M"} ${at.x(i).toFixed(1)} ${at.y(v).toFixed(1)} `;
    pen = true;
  });
  return d.trim();
}
