/** How the page writes numbers and times: short, and the same everywhere. */

export function formatMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60_000);
  const seconds = Math.floor((ms % 60_000) / 1000);
  return `${minutes} m ${String(seconds).padStart(2, "0")} s`;
}

/** A share in [0, 1] as a whole percentage: "75 %" (a space that does not break). */
export function formatShare(share: number): string {
  return `${Math.round(share * 100)}\u00a0%`;
}

/** "1 attempt", "2 attempts". */
export function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

export function formatTokens(input: number | null, output: number | null): string {
  if (input === null && output === null) return "—";
  return `${input ?? "—"} in / ${output ?? "—"} out`;
}

function pad(n: number): string {
  return String(n).padStart(2, "0");
}

/** Local wall-clock time, with the date only when it is not today. */
export function formatTime(epochMs: number, opts: { now: number }): string {
  const at = new Date(epochMs);
  const time = `${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}`;
  if (new Date(opts.now).toDateString() === at.toDateString()) return time;
  return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())} ${time}`;
}

/** `datetime-local` input value to epoch ms; undefined when empty or unreadable. */
export function parseLocalDateTime(value: string): number | undefined {
  if (value.trim() === "") return undefined;
  const ms = new Date(value).getTime();
  return Number.isFinite(ms) ? ms : undefined;
}

const STATE_LABELS: Record<string, string> = {
  waiting_for_slot: "waiting for slot",
  waiting_for_headers: "waiting for headers",
  holding: "holding",
  streaming: "streaming",
  finishing: "finishing",
};

export function stateLabel(state: string): string {
  return STATE_LABELS[state] ?? state;
}

/** Where a config problem is: its dotted key path, or the whole document. */
export function pathLabel(path: string): string {
  return path === "" ? "(whole config)" : path;
}

/** Hours and minutes, local time: the axis labels of the trend charts. */
export function formatClock(epochMs: number): string {
  const at = new Date(epochMs);
  return `${pad(at.getHours())}:${pad(at.getMinutes())}`;
}

/** The full date, time and time zone, for a `title` on hover. */
export function fullTime(epochMs: number): string {
  return new Date(epochMs).toLocaleString(undefined, {
    dateStyle: "full",
    timeStyle: "long",
  });
}
