import type { RuleRunner, RunnerEvents } from "./guardrail_runner.ts";
import { guardrailRulesMain, type RulesPort } from "./guardrail_worker.ts";

/** The child's heap: a check reads at most `max_checked_chars` of text. */
const HEAP_MIB = 512;

/**
 * Runs in the child: the rules' port over stdin and stdout, one JSON message per line (JSON
 * escapes every newline inside a string). Self-contained, like `guardrailRulesMain`.
 */
export function stdioPort(): RulesPort {
  const encoder = new TextEncoder();
  const port: RulesPort = {
    onmessage: null,
    postMessage(message) {
      const bytes = encoder.encode(JSON.stringify(message) + "\n");
      for (let at = 0; at < bytes.length;) at += Deno.stdout.writeSync(bytes.subarray(at));
    },
  };
  (async () => {
    const decoder = new TextDecoder();
    // Parts of the line so far: a megabyte line comes in many chunks, each scanned once.
    let parts: string[] = [];
    for await (const chunk of Deno.stdin.readable) {
      let text = decoder.decode(chunk, { stream: true });
      for (let nl = text.indexOf("\n"); nl >= 0; nl = text.indexOf("\n")) {
        const line = parts.join("") + text.slice(0, nl);
        parts = [];
        text = text.slice(nl + 1);
        port.onmessage?.({ data: JSON.parse(line) });
      }
      if (text) parts.push(text);
    }
  })();
  return port;
}

/**
 * The rules in a child process of the same `deno`, started with no permissions and an empty
 * environment (it can read nothing, not even the providers' keys), its heap capped. `stop`
 * kills it with SIGKILL, which ends a rule stuck backtracking at once (a worker thread cannot be
 * stopped that way: guardrail_runner.ts).
 */
export function spawnProcessRunner(events: RunnerEvents): RuleRunner {
  const source = `(${guardrailRulesMain.toString()})((${stdioPort.toString()})())`;
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-prompt",
      "--no-config",
      "--no-remote",
      "--quiet",
      `--v8-flags=--max-old-space-size=${HEAP_MIB}`,
      `data:application/javascript,${encodeURIComponent(source)}`,
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
    clearEnv: true,
    env: {},
  }).spawn();
  let stopped = false;
  const fail = (why: string) => {
    if (!stopped) events.onFailure(why);
  };
  const writer = child.stdin.getWriter();
  const encoder = new TextEncoder();
  const reading = readLines(child.stdout, (line) => {
    if (stopped) return;
    let reply;
    try {
      reply = JSON.parse(line);
    } catch {
      return fail("the guardrail process wrote something that is not a reply");
    }
    events.onReply(reply);
  }).catch((err) => fail(`reading the guardrail process: ${err}`));
  const exited = child.status.then((s) =>
    fail(`the guardrail process exited (code ${s.code}${s.signal ? `, ${s.signal}` : ""})`)
  );
  return {
    send(check) {
      // A write fails only once the child is gone, which `exited` reports.
      writer.write(encoder.encode(JSON.stringify(check) + "\n")).catch(() => {});
    },
    async stop() {
      if (!stopped) {
        stopped = true;
        try {
          child.kill("SIGKILL");
        } catch { /* already gone */ }
        writer.abort().catch(() => {});
      }
      await Promise.all([exited, reading]);
    },
  };
}

async function readLines(stream: ReadableStream<Uint8Array>, onLine: (line: string) => void) {
  const decoder = new TextDecoder();
  let buffered = "";
  for await (const chunk of stream) {
    buffered += decoder.decode(chunk, { stream: true });
    for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
      onLine(buffered.slice(0, nl));
      buffered = buffered.slice(nl + 1);
    }
  }
}
