import { useRef } from "preact/hooks";
import type { ConfigModel } from "../config_model.ts";
import { formatTime, pathLabel } from "../format.ts";

export interface ConfigEditorProps {
  config: ConfigModel;
  now: () => number;
}

/**
 * The stored config as JSON. Check and Save send the whole document; each problem the gateway
 * finds is listed at its key path, and clicking one selects that key in the text.
 */
export function ConfigEditor({ config, now }: ConfigEditorProps) {
  const editor = useRef<HTMLTextAreaElement>(null);
  const view = config.view.value;
  const notice = config.notice.value;
  const busy = config.busy.value;
  return (
    <section aria-labelledby="config-title">
      <header class="panel-head">
        <h2 id="config-title">Config</h2>
        <span class="muted">{sourceLabel(view, now())}</span>
      </header>
      <p class="muted">
        Secrets are never stored: fields ending in <code>_env</code>{" "}
        name the environment variable that holds them.
      </p>
      <textarea
        ref={editor}
        class="config"
        aria-label="Config JSON"
        spellcheck={false}
        rows={20}
        value={config.text.value}
        onInput={(e) => (config.text.value = e.currentTarget.value)}
      />
      <div class="actions">
        <button type="button" disabled={busy} onClick={() => config.check()}>Check</button>
        <button type="button" disabled={busy} onClick={() => config.save()}>Save</button>
        <button type="button" class="quiet" disabled={busy} onClick={() => config.load()}>
          Reload stored
        </button>
      </div>
      {notice && <p class={`notice ${notice.ok ? "ok" : "error"}`} role="status">{notice.text}</p>}
      {config.problems.value.length > 0 && (
        <ul class="problems" aria-label="Config problems">
          {config.problems.value.map((p) => (
            <li key={p.path + p.message}>
              <button
                type="button"
                class="link"
                onClick={() => selectKey(editor.current, p.path)}
              >
                <code>{pathLabel(p.path)}</code>
              </button>{" "}
              {p.message}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function sourceLabel(view: ConfigModel["view"]["value"], now: number): string {
  if (!view) return "";
  if (view.source === "demo") return "demo profile (SIMULATED upstreams), not stored yet";
  if (view.source === "none") return "no config stored";
  return view.updatedAt === null ? "stored" : `stored ${formatTime(view.updatedAt, { now })}`;
}

/** Selects the last named key of `path` in the editor, so the operator lands on the problem. */
function selectKey(textarea: HTMLTextAreaElement | null, path: string): void {
  if (!textarea) return;
  const key = path.split(".").filter((s) => !/^\d+$/.test(s)).at(-1);
  if (!key) return;
  const at = textarea.value.indexOf(JSON.stringify(key));
  if (at < 0) return;
  textarea.focus();
  textarea.setSelectionRange(at, at + key.length + 2);
}
