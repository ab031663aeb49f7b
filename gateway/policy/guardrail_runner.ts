import { spawnProcessRunner } from "./guardrail_process.ts";
import { spawnWorkerRunner } from "./guardrail_worker.ts";

/** A rule as the runner gets it. */
export interface MatchRule {
  pattern: string;
  flags: string;
}

/** One check: the text and the rules, in order. */
export interface RuleCheck {
  id: number;
  text: string;
  rules: MatchRule[];
}

/** `matched`: the index of the first rule that matched, or null. */
export type RunnerReply = { ready: true } | { id: number; matched?: number | null; error?: string };

/** Where the rules run, as the matcher sees it. */
export interface RuleRunner {
  send(check: RuleCheck): void;
  /** Ends the runner, even one stuck in a rule; resolves once it is gone. */
  stop(): Promise<void>;
}

export interface RunnerEvents {
  onReply(reply: RunnerReply): void;
  /** The runner died or could not start; no reply will come. */
  onFailure(why: string): void;
}

/**
 * `process`: a child process with no permissions, killed when a check outruns its budget.
 * `worker`: a worker thread, where the gateway may not start processes. Deno's
 * `Worker.terminate()` does not stop a thread that is running JavaScript (denoland/deno#35657):
 * a rule stuck backtracking keeps a core busy until it finishes (docs/security.md "Guardrails are
 * bounded").
 */
export type RunnerKind = "process" | "worker";

/** A process where this runtime may start one: `deno run` of its own executable. */
export function runnerKind(): RunnerKind {
  // A compiled binary's executable is the gateway itself, not a `deno` that can run a script.
  if ((Deno.build as { standalone?: boolean }).standalone) return "worker";
  const state = Deno.permissions.querySync({ name: "run", command: Deno.execPath() }).state;
  return state === "granted" ? "process" : "worker";
}

/** Throws where the runtime can start neither. */
export function spawnRuleRunner(kind: RunnerKind, events: RunnerEvents): RuleRunner {
  return kind === "process" ? spawnProcessRunner(events) : spawnWorkerRunner(events);
}
