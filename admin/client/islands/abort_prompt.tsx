import { useEffect, useRef } from "preact/hooks";
import type { Aborts, ShownFence } from "../aborts.ts";
import { fenceWarning } from "../fences_model.ts";
import { Time } from "./time.tsx";

/**
 * The confirmation an Abort button opens, naming what will stop and what its fence will refuse
 * (docs/admin.md "Fences"); focus moves to it, then to the result once the abort is done, so a
 * keyboard user is never left on a row that went away. The result names the fence the abort
 * left, until when, with a Lift for it.
 */
export function AbortPrompt({ aborts, panel = "live" }: { aborts: Aborts; panel?: string }) {
  const mine = <T extends { panel?: string }>(what: T | null): T | null =>
    what && (what.panel ?? "live") === panel ? what : null;
  const asked = mine(aborts.asked.value);
  const result = mine(aborts.result.value);
  const confirmRef = useRef<HTMLButtonElement>(null);
  const resultRef = useRef<HTMLParagraphElement>(null);
  useEffect(() => confirmRef.current?.focus(), [asked?.kind, asked?.id]);
  useEffect(() => resultRef.current?.focus(), [result?.text]);
  if (asked) {
    const what = `${asked.kind} ${asked.id}`;
    const secs = aborts.fences.view.value?.fenceSecs[asked.kind === "session" ? "session" : "turn"];
    return (
      <div class="notice confirm" role="alertdialog" aria-label={`Abort ${what}?`}>
        <span>
          Abort {asked.kind} <code>{asked.id}</code>?{" "}
          {asked.kind === "session" ? "Every running request of the session stops. " : ""}
          {fenceWarning(asked.kind === "session" ? "session" : "turn", secs)}
        </span>
        <button type="button" class="danger" ref={confirmRef} onClick={() => aborts.confirm()}>
          Abort {what}
        </button>
        <button type="button" class="quiet" onClick={() => aborts.cancel()}>Cancel</button>
      </div>
    );
  }
  if (!result) return null;
  return (
    <p class={`notice ${result.ok ? "ok" : "error"}`} role="status" tabIndex={-1} ref={resultRef}>
      {result.text}
      {result.fence !== undefined && (
        <FenceNote fence={result.fence} aborts={aborts} now={aborts.fences.gatewayNow()} />
      )}
      <button
        type="button"
        class="quiet"
        onClick={() =>
          aborts.dismiss()}
      >
        Dismiss
      </button>
    </p>
  );
}

const FENCED = { session: "The session is fenced", turn: "Its turn is fenced" } as const;

function FenceNote(
  { fence, aborts, now }: { fence: ShownFence | null; aborts: Aborts; now: number },
) {
  if (!fence) return <span class="fence-note">. No fence was left.</span>;
  if (fence.state === "lifted") {
    return <span class="fence-note">. Fence lifted: its requests are answered again.</span>;
  }
  return (
    <span class="fence-note" data-fence-id={fence.id}>
      . {FENCED[fence.kind]} until <Time at={fence.expiresAt} now={now} />.
      <button
        type="button"
        title="Lifts the fence: the requests it refuses are answered again"
        disabled={fence.state === "lifting"}
        onClick={() => aborts.lift()}
      >
        Lift
      </button>
      {fence.error && <span class="why">{fence.error}</span>}
    </span>
  );
}
