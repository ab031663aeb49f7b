/** A rule as the worker gets it. */
export interface MatchRule {
  pattern: string;
  flags: string;
}

/** `matched`: the index of the first rule that matched, or null. */
export type WorkerReply = { ready: true } | { id: number; matched?: number | null; error?: string };

/**
 * The guardrail rules' thread. A backtracking regular expression can run for
 * minutes on a crafted input (docs/security.md, "Guardrails are bounded"); here
 * it stalls only this worker, which the serving thread terminates when the
 * budget is spent.
 *
 * Like the history worker, it starts from this one function's source (a
 * `data:` URL), so the function is self-contained and shares no closure with
 * this module.
 */
export function guardrailWorkerMain(): void {
  type Rule = { pattern: string; flags: string };
  type Message = { id: number; text: string; rules: Rule[] };
  type Port = {
    onmessage: ((event: MessageEvent<Message>) => void) | null;
    postMessage(message: unknown): void;
  };
  const port = globalThis as unknown as Port;
  // Rules change rarely: each pattern is compiled once per worker.
  const compiled = new Map<string, RegExp>();
  const regexOf = (rule: Rule) => {
    const key = `${rule.flags}/${rule.pattern}`;
    let re = compiled.get(key);
    if (compiled.size > 1_000) compiled.clear(); // rules edited many times: start over
    if (!re) compiled.set(key, re = new RegExp(rule.pattern, rule.flags));
    return re;
  };
  port.onmessage = (event) => {
    const { id, text, rules } = event.data;
    try {
      const hit = rules.findIndex((rule) => regexOf(rule).test(text));
      port.postMessage({ id, matched: hit < 0 ? null : hit });
    } catch (err) {
      port.postMessage({ id, error: String(err) });
    }
  };
  port.postMessage({ ready: true });
}

/** Throws where the runtime has no workers. */
export function spawnGuardrailWorker(): Worker {
  const source = `(${guardrailWorkerMain.toString()})()`;
  return new Worker(`data:application/javascript,${encodeURIComponent(source)}`, {
    type: "module",
  });
}
