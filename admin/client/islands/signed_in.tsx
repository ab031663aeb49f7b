import type { ComponentChildren } from "preact";
import type { Auth } from "../auth.ts";

/** Renders an island's content only for a signed-in tab: no data is asked for before. */
export function SignedIn({ auth, children }: { auth: Auth; children: ComponentChildren }) {
  return auth.status.value === "signed_in" ? <>{children}</> : null;
}
