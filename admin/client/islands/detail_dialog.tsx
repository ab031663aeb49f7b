import type { ComponentChildren } from "preact";
import { useEffect, useRef } from "preact/hooks";

/**
 * A modal dialog that opens where the operator is looking: focus moves to its title when it
 * opens and goes back to what opened it when it closes (Close, Escape or the backdrop).
 */
export function DetailDialog(
  props: { titleId: string; title: string; onClose: () => void; children: ComponentChildren },
) {
  const dialog = useRef<HTMLDialogElement>(null);
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    const opener = document.activeElement;
    const box = dialog.current;
    if (box && !box.open) box.showModal();
    heading.current?.focus();
    return () => {
      if (opener instanceof HTMLElement && opener.isConnected) opener.focus();
    };
  }, []);
  return (
    <dialog
      ref={dialog}
      class="detail"
      aria-labelledby={props.titleId}
      onClose={props.onClose}
      onClick={(e) => {
        // A click on the backdrop lands on the dialog element itself.
        if (e.target === dialog.current) dialog.current?.close();
      }}
    >
      <div class="detail-body">
        <header class="panel-head">
          <h3 id={props.titleId} tabIndex={-1} ref={heading}>{props.title}</h3>
          <button type="button" class="quiet" onClick={() => dialog.current?.close()}>
            Close
          </button>
        </header>
        {props.children}
      </div>
    </dialog>
  );
}
