import { formatTime, fullTime } from "../format.ts";

/** A short local time; the full date, time and time zone on hover. */
export function Time({ at, now }: { at: number; now: number }) {
  return (
    <time dateTime={new Date(at).toISOString()} title={fullTime(at)}>
      {formatTime(at, { now })}
    </time>
  );
}
