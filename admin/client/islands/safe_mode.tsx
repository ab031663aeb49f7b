import type { RepairAction } from "../../api_types.ts";
import type { ConfigModel } from "../config_model.ts";
import { pathLabel } from "../format.ts";

/**
 * docs/design.md "Config" safe mode: why the gateway refuses to proxy, and the repair it can make. Shown at the
 * top of the page, where an operator looks first.
 */
export function SafeMode({ config }: { config: ConfigModel }) {
  const safeMode = config.view.value?.safeMode ?? null;
  const notice = config.repairNotice.value;
  if (!safeMode) {
    return notice
      ? <p class={`notice ${notice.ok ? "ok" : "error"}`} role="status">{notice.text}</p>
      : null;
  }
  const repair = safeMode.repair;
  return (
    <section class="safe-mode" role="alert" aria-labelledby="safe-mode-title">
      <h2 id="safe-mode-title">Safe mode</h2>
      <p>
        The stored config is invalid, so every proxy request is answered 503{" "}
        <code>config.invalid</code>. Admin, history and abort still work.
      </p>
      <ul class="problems">
        {safeMode.problems.map((p) => (
          <li key={p.path + p.message}>
            <code>{pathLabel(p.path)}</code> {p.message}
          </li>
        ))}
      </ul>
      {repair
        ? (
          <>
            <p>The gateway can repair it:</p>
            <ul class="repairs">
              {repair.map((a) => <li key={a.path}>{describeAction(a)}</li>)}
            </ul>
            <button
              type="button"
              disabled={config.busy.value}
              onClick={() => config.repair(repair)}
            >
              Apply repair
            </button>
          </>
        )
        : <p>No automatic repair: fix the config in the editor below and save it.</p>}
      {notice && <p class={`notice ${notice.ok ? "ok" : "error"}`}>{notice.text}</p>}
    </section>
  );
}

function describeAction(action: RepairAction) {
  if (action.op === "delete") {
    return (
      <>
        Delete <code>{action.path}</code> ({action.reason})
      </>
    );
  }
  return (
    <>
      Set <code>{action.path}</code> to {action.value} ({action.reason})
    </>
  );
}
