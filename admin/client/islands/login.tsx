import { useSignal } from "@preact/signals";
import type { Auth } from "../auth.ts";

export interface LoginProps {
  auth: Auth;
  onSignIn: (token: string) => void;
}

/**
 * Sign-in for the tab: the token is kept in sessionStorage and sent as `Authorization: Bearer`.
 * A gateway without a token that serves loopback needs none, and says so.
 */
export function Login({ auth, onSignIn }: LoginProps) {
  const draft = useSignal("");
  const status = auth.status.value;
  if (status === "signed_in") {
    const open = auth.info.value?.tokenRequired === false;
    return (
      <div class="login signed-in">
        <span>{open ? "Open on loopback (no admin token set)" : "Signed in"}</span>
        {!open && (
          <button type="button" class="quiet" onClick={() => auth.signOut("Signed out.")}>
            Sign out
          </button>
        )}
      </div>
    );
  }
  return (
    <form
      class="login"
      onSubmit={(e) => {
        e.preventDefault();
        onSignIn(draft.value);
        draft.value = "";
      }}
    >
      <label>
        Admin token
        <input
          type="password"
          name="token"
          autocomplete="current-password"
          value={draft.value}
          onInput={(e) => (draft.value = e.currentTarget.value)}
          disabled={status === "checking"}
        />
      </label>
      <button type="submit" disabled={status === "checking"}>Sign in</button>
      {auth.message.value && <p class="notice error" role="alert">{auth.message.value}</p>}
    </form>
  );
}
