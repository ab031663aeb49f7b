import type { FenceView } from "../../api_types.ts";
import { fenceKeyLabel, type Fences, formatExpiry } from "../fences_model.ts";
import { TableHead } from "./table_head.tsx";
import { Time } from "./time.tsx";

/**
 * The fences in force (docs/admin.md "Fences"): what each refuses, until when, counting down as
 * the Sessions panel redraws, and a Lift for each. Lifting reads the list again.
 */
export function FenceList({ fences }: { fences: Fences }) {
  const view = fences.view.value;
  const now = fences.gatewayNow();
  return (
    <section class="fences" aria-labelledby="fences-title">
      <h3 id="fences-title">Fences</h3>
      {fences.error.value && <p class="notice error" role="alert">{fences.error.value}</p>}
      {view && view.fences.length === 0 && (
        <p class="empty">
          No fence is in force. An abort leaves one: a session abort refuses the session's new
          requests, a request abort the same turn sent again.
        </p>
      )}
      {view && view.fences.length > 0 && (
        <table class="cards fences">
          <TableHead
            columns={[
              "Fence",
              "Key",
              "Session",
              "Request",
              "Expires",
              <span key="lift" class="visually-hidden">Lift</span>,
            ]}
          />
          <tbody>
            {view.fences.map((f) => <FenceRow key={f.id} f={f} fences={fences} now={now} />)}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** The Lift button's name: what is lifted, for a screen reader and a test to find it by. */
export function liftLabel(f: Pick<FenceView, "kind" | "sessionId" | "requestId">): string {
  return f.kind === "session"
    ? `Lift session fence ${f.sessionId ?? ""}`
    : `Lift turn fence of request ${f.requestId ?? ""}`;
}

function FenceRow({ f, fences, now }: { f: FenceView; fences: Fences; now: number }) {
  const expiry = formatExpiry(f.expiresAt, { now });
  return (
    <tr data-fence-id={f.id} data-fence-kind={f.kind}>
      <td data-label="Fence">
        <span class="tag fence">{f.kind}</span>
        <small>
          <code>{f.id}</code>
        </small>
      </td>
      <td data-label="Key">{fenceKeyLabel(f)}</td>
      <td data-label="Session">{f.sessionId ? <code>{f.sessionId}</code> : "—"}</td>
      <td data-label="Request">{f.requestId ? <code>{f.requestId}</code> : "—"}</td>
      <td data-label="Expires" class="expiry">
        {expiry}
        <small>
          until <Time at={f.expiresAt} now={now} />
        </small>
      </td>
      <td>
        {expiry !== "expired" && (
          <button
            type="button"
            aria-label={liftLabel(f)}
            title="Lifts the fence: the requests it refuses are answered again"
            disabled={fences.lifting.value.has(f.id)}
            onClick={() => void fences.lift(f.id)}
          >
            Lift
          </button>
        )}
      </td>
    </tr>
  );
}
