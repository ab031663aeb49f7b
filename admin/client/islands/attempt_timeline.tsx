import { formatMs } from "../format.ts";
import { describeBar, type Timeline, type TimelineBar } from "../timeline.ts";

// Drawing units of the viewBox; the SVG scales to the width it is given.
const WIDTH = 640;
const LABEL = 120;
// Room after the longest bar for its outcome.
const RIGHT = 96;
const ROW = 30;
const BAR = 12;
const TOP = 8;
const AXIS = 26;

/**
 * The attempt chain on one time axis: a bar per hop from send to end, a tick where its headers
 * came, a dot at its first content, and its end marked by outcome. Hops that ran at the same time
 * (hedges) share a band; a resumed hop is joined to the hop whose answer it continued.
 */
export function AttemptTimeline({ timeline }: { timeline: Timeline }) {
  const { bars, spanMs } = timeline;
  const height = TOP + bars.length * ROW + AXIS;
  const x = (ms: number) => LABEL + (ms / spanMs) * (WIDTH - LABEL - RIGHT);
  const y = (row: number) => TOP + row * ROW + ROW / 2;
  const label = bars.map(describeBar).join(". ");
  return (
    <figure class="timeline">
      <svg
        viewBox={`0 0 ${WIDTH} ${height}`}
        role="img"
        aria-label={`Attempt timeline. ${label}.`}
      >
        {bars.map((b, row) =>
          b.hedged && (
            <rect
              key={`band-${b.hop}`}
              class="hedge-band"
              x={0}
              y={TOP + row * ROW}
              width={WIDTH}
              height={ROW}
            />
          )
        )}
        {timeline.ticks.map((t) => (
          <g key={`tick-${t}`} class="axis">
            <line x1={x(t)} x2={x(t)} y1={TOP} y2={height - AXIS + 4} />
            <text x={x(t)} y={height - 8} text-anchor="middle">{formatMs(t)}</text>
          </g>
        ))}
        {bars.map((b, row) => <Hop key={b.hop} bar={b} x={x} y={y(row)} />)}
        {bars.map((b, row) => {
          if (b.resumes === null) return null;
          const from = bars.findIndex((o) => o.hop === b.resumes);
          const prev = bars[from];
          if (!prev) return null;
          return (
            <g key={`join-${b.hop}`} class="join" data-joins={`${prev.hop}-${b.hop}`}>
              <path
                d={`M ${x(prev.endMs)} ${y(from)} C ${x(prev.endMs) + 12} ${y(from)}, ${
                  x(b.startMs) - 12
                } ${y(row)}, ${x(b.startMs)} ${y(row)}`}
              />
              <title>{`hop ${b.hop} resumes the answer of hop ${prev.hop}`}</title>
            </g>
          );
        })}
      </svg>
      <figcaption class="legend">
        <span class="key bar-key">sent → ended</span>
        <span class="key headers-key">headers</span>
        <span class="key content-key">first content</span>
        <span class="key end-key">idle timeout / abort / error</span>
        <span class="key hedge-key">ran at the same time (hedge)</span>
      </figcaption>
    </figure>
  );
}

function Hop(props: { bar: TimelineBar; x: (ms: number) => number; y: number }) {
  const { bar: b, x, y } = props;
  const left = x(b.startMs);
  const right = Math.max(x(b.endMs), left + 2);
  const kind = b.running ? "running" : b.outcome ?? "running";
  const bad = ["idle_timeout", "aborted", "error", "client_disconnected"].includes(kind);
  return (
    <g class={`hop ${kind}`} data-hop={b.hop}>
      <title>{describeBar(b)}</title>
      <text class="hop-label" x={LABEL - 8} y={y + 4} text-anchor="end">
        {`${b.hop} · ${b.upstream}`}
      </text>
      <rect class="bar" x={left} y={y - BAR / 2} width={right - left} height={BAR} rx={3} />
      {b.headersMs !== null && (
        <line class="mark headers" x1={x(b.headersMs)} x2={x(b.headersMs)} y1={y - 9} y2={y + 9} />
      )}
      {b.firstContentMs !== null && (
        <circle class="mark content" cx={x(b.firstContentMs)} cy={y} r={4.5} />
      )}
      {bad && <rect class="mark end" x={right - 3} y={y - 9} width={6} height={18} />}
      <text class="outcome" x={right + 6} y={y + 4}>
        {b.running ? "running" : (b.outcome === "hedge_lost" ? "hedge lost" : b.outcome) ?? ""}
      </text>
    </g>
  );
}
