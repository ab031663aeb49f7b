import { signal } from "@preact/signals";
import type { SessionInfo } from "../api_types.ts";
import { type AdminApi, ApiFailure, describeFailure } from "./api.ts";

/** Where the tab keeps its token: sessionStorage, so it ends with the tab. */
export type TokenStore = Pick<Storage, "getItem" | "setItem" | "removeItem">;

const TOKEN_KEY = "pulsegate.adminToken";

export type AuthStatus = "checking" | "signed_out" | "signed_in";

/** Who the page is talking as. Panels render only while `status` is `signed_in`. */
export function createAuth(store: TokenStore) {
  const token = signal<string | null>(store.getItem(TOKEN_KEY));
  const status = signal<AuthStatus>("checking");
  const info = signal<SessionInfo | null>(null);
  /** Why the last sign-in failed or the session ended, shown by the login form. */
  const message = signal<string | null>(null);
  return {
    token,
    status,
    info,
    message,
    accept(accepted: { token: string | null; info: SessionInfo }) {
      token.value = accepted.token;
      if (accepted.token) store.setItem(TOKEN_KEY, accepted.token);
      else store.removeItem(TOKEN_KEY);
      info.value = accepted.info;
      message.value = null;
      status.value = "signed_in";
    },
    /** Forgets the token; `why` is shown next to the form. */
    signOut(why: string | null) {
      token.value = null;
      store.removeItem(TOKEN_KEY);
      info.value = null;
      message.value = why;
      status.value = "signed_out";
    },
  };
}

export type Auth = ReturnType<typeof createAuth>;

/** On load: the stored token, or no token at all when the gateway serves loopback openly. */
export async function resumeSession(api: AdminApi, auth: Auth): Promise<void> {
  const stored = auth.token.peek();
  try {
    auth.accept({ token: stored, info: await api.session(stored) });
  } catch (err) {
    const refused = err instanceof ApiFailure && err.detail.status === 401;
    if (!refused) return auth.signOut(`Cannot reach the gateway: ${describeFailure(err)}`);
    if (err.detail.code === "admin.closed") return auth.signOut(`${err.message}.`);
    auth.signOut(stored ? "The stored token was refused: sign in again." : null);
  }
}

/** Tries a token; it is stored for the tab only when the gateway accepts it. */
export async function signIn(api: AdminApi, opts: { auth: Auth; token: string }): Promise<void> {
  const { auth } = opts;
  const token = opts.token.trim();
  if (token === "") return auth.signOut("Enter the admin token.");
  auth.status.value = "checking";
  try {
    auth.accept({ token, info: await api.session(token) });
  } catch (err) {
    const refused = err instanceof ApiFailure && err.detail.status === 401;
    auth.signOut(
      refused
        ? `Token refused: ${err.message}.`
        : `Cannot reach the gateway: ${describeFailure(err)}`,
    );
  }
}
