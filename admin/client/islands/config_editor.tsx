import { useRef } from "preact/hooks";
import type { ConfigModel } from "../config_model.ts";
import { pathLabel } from "../format.ts";
import { Time } from "./time.tsx";
import { ConfigVersions, PendingConfirm } from "./config_changes.tsx";

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
      <PendingConfirm config={config} />
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
      <ConfigVersions config={config} now={now()} />
    </section>
  );
}

function sourceLabel(view: ConfigModel["view"]["value"], now: number) {
  if (!view) return "";
  if (view.source === "demo") return "demo profile (SIMULATED upstreams), not stored yet";
  if (view.source === "none") return "no config stored";
  return view.updatedAt === null ? "stored" : (
    <>
      stored <Time at={view.updatedAt} now={now} />
    </>
  );
}

/**
 * Selects the last named key of `path` in the editor and scrolls it into view, so the operator
 * lands on the problem even when it is far down a long config.
 */
function selectKey(textarea: HTMLTextAreaElement | null, path: string): void {
  if (!textarea) return;
  const key = path.split(".").filter((s) => !/^\d+$/.test(s)).at(-1);
  if (!key) return;
  const at = textarea.value.indexOf(JSON.stringify(key));
  if (at < 0) return;
  textarea.focus({ preventScroll: true });
  textarea.setSelectionRange(at, at + key.length + 2);
  const line = textarea.value.slice(0, at).split("\n").length - 1;
  const lineHeight = parseFloat(getComputedStyle(textarea).lineHeight) || 20;
  // A third of the way down, so the lines around the key show too.
  textarea.scrollTop = Math.max(0, line * lineHeight - textarea.clientHeight / 3);
  // Then the page, so the key's line (not just some part of a tall editor) is on screen.
  const top = textarea.getBoundingClientRect().top + line * lineHeight - textarea.scrollTop;
  if (top < 0 || top > innerHeight - 2 * lineHeight) scrollBy({ top: top - innerHeight / 3 });
}
