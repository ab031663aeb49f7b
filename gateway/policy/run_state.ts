import type { Config } from "../config/schema.ts";
import type { Guardrails } from "./guardrails.ts";
import type { GuardrailMatcher } from "./guardrail_matcher.ts";

/** The state that changes while the process runs: the config in force, or why there is none. */
export interface RunState {
  config: Config | null;
  /** Why the stored config is refused (safe mode), shown to clients as `config.invalid`. */
  safeModeReason: string | null;
  /** Version of the stored config in force (docs/scaling.md); null for the demo or none stored. */
  configVersion: number | null;
  /** Proxy open without keys is only allowed on loopback (docs/design.md "Client API"). */
  loopback: boolean;
  shuttingDown: boolean;
  /** Guardrails in force (docs/observability.md), and the worker their rules run on. */
  guardrails: () => Guardrails;
  guardrailMatcher: GuardrailMatcher;
  /** Whether a traces destination is on (docs/observability.md "Traces"). */
  tracing?: () => boolean;
}
