import { useEffect, useRef } from "preact/hooks";
import { showValue } from "../config_diff.ts";
import type { ConfigModel } from "../config_model.ts";
import { Time } from "./time.tsx";

/**
 * A save or rollback waiting for confirmation: every key path it changes, old and new. Focus
 * moves to the confirm button so Enter confirms and Tab reaches Cancel.
 */
export function PendingConfirm({ config }: { config: ConfigModel }) {
  const change = config.pending.value;
  const confirm = useRef<HTMLButtonElement>(null);
  useEffect(() => confirm.current?.focus(), [change]);
  if (!change) return null;
  const what = change.kind === "save"
    ? "Save these changes"
    : `Roll back to version ${change.version}`;
  return (
    <div class="notice confirm config-diff" role="alertdialog" aria-label={`${what}?`}>
      <p>
        {change.kind === "save"
          ? "Save this config? It goes in force at once for new requests."
          : `Put version ${change.version} back? It is stored as the newest version.`}
      </p>
      {change.changes.length === 0
        ? <p>It is the same as the stored config.</p>
        : (
          <table class="diff" aria-label="Changes">
            <thead>
              <tr>
                <th scope="col">Key</th>
                <th scope="col">Now</th>
                <th scope="col">After</th>
              </tr>
            </thead>
            <tbody>
              {change.changes.map((c) => (
                <tr key={c.path} class={c.kind}>
                  <th scope="row">
                    <code>{c.path || "(whole config)"}</code>
                  </th>
                  <td>
                    {c.kind === "added" ? <em>absent</em> : <code>{showValue(c.before)}</code>}
                  </td>
                  <td>
                    {c.kind === "removed" ? <em>removed</em> : <code>{showValue(c.after)}</code>}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      <button type="button" ref={confirm} onClick={() => config.confirm()}>{what}</button>
      <button type="button" class="quiet" onClick={() => config.cancel()}>Cancel</button>
    </div>
  );
}

const AUTHORS: Record<string, string> = {
  admin: "admin",
  file: "config file at start",
  repair: "safe-mode repair",
  stored: "stored before versions were kept",
};

/** The kept versions, newest first, each one click from being put back (after a diff). */
export function ConfigVersions({ config, now }: { config: ConfigModel; now: number }) {
  const versions = config.versions.value;
  if (versions.length === 0) return null;
  return (
    <>
      <h3 id="config-versions-title">Versions</h3>
      <table class="cards versions" aria-labelledby="config-versions-title">
        <thead>
          <tr>
            <th scope="col">Version</th>
            <th scope="col">Saved</th>
            <th scope="col">By</th>
            <th scope="col">
              <span class="visually-hidden">Roll back</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {versions.map((v) => (
            <tr key={v.id} data-version={v.id}>
              <td data-label="Version">
                {v.id}
                {v.current && <span class="tag current">in force</span>}
              </td>
              <td data-label="Saved">
                <Time at={v.savedAt} now={now} />
              </td>
              <td data-label="By">
                {AUTHORS[v.savedBy] ?? v.savedBy}
                {v.restoredFrom !== null && <small>rollback to version {v.restoredFrom}</small>}
              </td>
              <td>
                {!v.current && (
                  <button
                    type="button"
                    class="quiet"
                    aria-label={`Roll back to version ${v.id}`}
                    disabled={config.busy.value}
                    onClick={() => config.askRollback(v.id)}
                  >
                    Roll back
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
