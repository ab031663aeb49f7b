import { signal } from "@preact/signals";
import type { AbortFence, FencesView, FenceView } from "../api_types.ts";
import { type AdminApi, describeFailure } from "./api.ts";
import { formatMs } from "./format.ts";

export type FenceKind = AbortFence["kind"];

/**
 * The fences operators' aborts left (docs/admin.md "Fences"), as last read, and the Lift calls.
 * The Sessions panel lists them; the abort confirmation reads how long each kind lasts from the
 * same answer, so a config saved a moment ago is what it promises.
 */
export function createFences(
  api: Pick<AdminApi, "fences" | "liftFence">,
  opts: { now: () => number },
) {
  const view = signal<FencesView | null>(null);
  /**
   * The gateway's clock minus this tab's at the last read: expiries are the gateway's times,
   * and a laptop's clock that runs a minute off must not show a fence a minute off.
   */
  const skewMs = signal(0);
  const error = signal<string | null>(null);
  /** The fences whose Lift is under way: their buttons wait. */
  const lifting = signal<ReadonlySet<string>>(new Set());
  const refresh = async () => {
    try {
      const read = await api.fences();
      skewMs.value = read.at - opts.now();
      view.value = read;
      error.value = null;
    } catch (err) {
      error.value = describeFailure(err);
    }
  };
  const busy = (id: string, on: boolean) => {
    const next = new Set(lifting.peek());
    if (on) next.add(id);
    else next.delete(id);
    lifting.value = next;
  };
  return {
    view,
    error,
    lifting,
    refresh,
    /** Now on the gateway's clock, for counting down to an expiry. */
    gatewayNow: () => opts.now() + skewMs.value,
    /**
     * Lifts a fence and reads the list again; resolves to null once lifted, or to why not (also
     * shown above the list). A fence gone already (expired, or lifted from another tab) is a
     * 404: the list is read again either way, so it no longer offers it.
     */
    async lift(id: string): Promise<string | null> {
      busy(id, true);
      try {
        await api.liftFence(id);
        await refresh();
        return null;
      } catch (err) {
        const why = `Could not lift fence ${id}: ${describeFailure(err)}`;
        await refresh();
        error.value = why;
        return why;
      } finally {
        busy(id, false);
      }
    },
    clear() {
      view.value = null;
      error.value = null;
      skewMs.value = 0;
    },
  };
}

export type Fences = ReturnType<typeof createFences>;

const UNITS: [name: string, secs: number][] = [
  ["d", 86_400],
  ["h", 3_600],
  ["min", 60],
  ["s", 1],
];

/** A configured duration as people say it: "2 min", "10 min", "1 h 30 min", "45 s". */
export function formatDuration(secs: number): string {
  const parts: { n: number; name: string }[] = [];
  let left = Math.max(0, Math.round(secs));
  for (const [name, size] of UNITS) {
    const n = Math.floor(left / size);
    left -= n * size;
    if (n > 0 || parts.length > 0) parts.push({ n, name });
  }
  // The two largest units say enough: "1 h 0 min 5 s" helps nobody decide.
  const said = parts.slice(0, 2).filter((p) => p.n > 0).map((p) => `${p.n} ${p.name}`);
  return said.join(" ") || "0 s";
}

/**
 * What the abort confirmation says the fence will do (docs/design.md "Abort and disconnect"),
 * from the durations in force; empty while they are not known yet.
 */
export function fenceWarning(kind: FenceKind, secs: number | undefined): string {
  if (secs === undefined) return "";
  if (kind === "session") {
    return secs > 0
      ? `Its new requests, under every key, will be refused for ${formatDuration(secs)}, ` +
        "or until the fence is lifted."
      : "No fence: session fences are off (abort.session_fence_secs is 0), so its new " +
        "requests are answered.";
  }
  return secs > 0
    ? `Its turn will be refused if re-sent for ${formatDuration(secs)}, or until the fence is ` +
      "lifted; a new turn of the conversation is answered."
    : "No fence: turn fences are off (abort.turn_fence_secs is 0), so a client that re-sends " +
      "the turn is answered.";
}

/** Time left on a fence, ticking as the panel redraws: "in 9 m 58 s", "expired". */
export function formatExpiry(expiresAt: number, opts: { now: number }): string {
  const left = expiresAt - opts.now;
  if (left <= 0) return "expired";
  return `in ${left < 3_600_000 ? formatMs(left) : formatDuration(left / 1000)}`;
}

/**
 * The fences that refuse a session row's requests: its session's, of its key or (a session
 * fence the admin token made) of every key.
 */
export function fencesOfSession(
  fences: readonly FenceView[],
  row: { keyId: string | null; sessionId: string },
): FenceView[] {
  return fences.filter((f) =>
    f.sessionId === row.sessionId &&
    (f.keyId === row.keyId || (f.kind === "session" && f.keyId === null))
  );
}

/**
 * Whose requests a fence refuses, as the list says it: a session fence without a key is the
 * admin token's, of every key; a turn fence without one is the open proxy's (no key).
 */
export function fenceKeyLabel(fence: Pick<FenceView, "keyId" | "kind">): string {
  return fence.keyId ?? (fence.kind === "session" ? "every key" : "open");
}
