import type { RuleRunner, RunnerEvents } from "./guardrail_runner.ts";

/** What the rules' main loop talks to: a worker's global scope, or a child's stdin and stdout. */
export interface RulesPort {
  onmessage: ((event: { data: unknown }) => void) | null;
  postMessage(message: unknown): void;
}

/**
 * The guardrail rules' loop. A backtracking regular expression can run for minutes on a crafted
 * input (docs/security.md, "Guardrails are bounded"); here it stalls only this thread or
 * process, never the serving thread.
 *
 * It runs from this one function's source (a `data:` URL), so it is self-contained and shares no
 * closure with this module.
 */
export function guardrailRulesMain(port: RulesPort): void {
  type Rule = { pattern: string; flags: string };
  type Message = { id: number; text: string; rules: Rule[] };
  // Rules change rarely: each pattern is compiled once per runner.
  const compiled = new Map<string, RegExp>();
  const regexOf = (rule: Rule) => {
    const key = `${rule.flags}/${rule.pattern}`;
    let re = compiled.get(key);
    if (compiled.size > 1_000) compiled.clear(); // rules edited many times: start over
    if (!re) compiled.set(key, re = new RegExp(rule.pattern, rule.flags));
    return re;
  };
  port.onmessage = (event) => {
    const { id, text, rules } = event.data as Message;
    try {
      const hit = rules.findIndex((rule) => regexOf(rule).test(text));
      port.postMessage({ id, matched: hit < 0 ? null : hit });
    } catch (err) {
      port.postMessage({ id, error: String(err) });
    }
  };
  port.postMessage({ ready: true });
}

/** The rules on a worker thread; throws where the runtime has no workers. */
export function spawnWorkerRunner(events: RunnerEvents): RuleRunner {
  const source = `(${guardrailRulesMain.toString()})(globalThis)`;
  const worker = new Worker(`data:application/javascript,${encodeURIComponent(source)}`, {
    type: "module",
  });
  worker.onmessage = (event) => events.onReply(event.data);
  worker.onerror = (event) => {
    event.preventDefault();
    events.onFailure(event.message);
  };
  return {
    send: (check) => worker.postMessage(check),
    stop: () => {
      worker.terminate();
      return Promise.resolve();
    },
  };
}
