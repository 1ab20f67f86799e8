import { useRef, useState } from "preact/hooks";

interface Ask {
  text: string;
  action: string;
  resolve: (ok: boolean) => void;
}

/**
 * useConfirm is an accessible confirmation: a modal <dialog> (focus kept
 * inside, Escape cancels, Cancel focused first) instead of the browser's
 * confirm(). ask resolves true when the user chose the action.
 */
export function useConfirm(): [preact.JSX.Element | null, (text: string, action: string) => Promise<boolean>] {
  const [ask, setAsk] = useState<Ask | null>(null);
  const ref = useRef<HTMLDialogElement>(null);
  const open = (text: string, action: string) =>
    new Promise<boolean>((resolve) => {
      setAsk({ text, action, resolve });
      queueMicrotask(() => {
        const d = ref.current;
        if (d && !d.open) d.showModal();
        d?.querySelector<HTMLButtonElement>("button.cancel")?.focus();
      });
    });
  const close = (ok: boolean) => {
    ref.current?.close();
    ask?.resolve(ok);
    setAsk(null);
  };
  const el = ask ? (
    <dialog
      ref={ref}
      class="confirm"
      aria-labelledby="confirm-text"
      onCancel={(e) => {
        e.preventDefault();
        close(false);
      }}
    >
      <p id="confirm-text">{ask.text}</p>
      <div class="actions">
        <button type="button" class="cancel" onClick={() => close(false)}>
          Cancel
        </button>
        <button type="button" class="danger" onClick={() => close(true)}>
          {ask.action}
        </button>
      </div>
    </dialog>
  ) : null;
  return [el, open];
}
