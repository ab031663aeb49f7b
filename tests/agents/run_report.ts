/** The printed account of one agent run, shown for passing and failing runs alike. */
import type { ScenarioRun } from "./agent_kit.ts";
import type { TapRecord } from "./gateway_tap.ts";

/** The command, what it printed, its calls to the gateway and their rows, the trap's hits. */
export function describeRun(id: string, run: ScenarioRun): string {
  const lines = [
    `--- ${id}: exit ${run.out.code}${run.out.timedOut ? " (timed out)" : ""} in ${
      (run.out.ms / 1000).toFixed(1)
    } s`,
    `$ ${run.command}`,
    `stdout: ${firstLines(run.out.stdout, 10)}`,
  ];
  if (run.out.stderr.trim()) lines.push(`stderr: ${firstLines(run.out.stderr, 10)}`);
  for (const call of run.calls) {
    const model = modelOf(call);
    lines.push(
      `gateway call: ${call.method} ${call.path}${
        model ? ` model=${model}` : ""
      } -> ${call.status}` +
        (call.errorBody ? ` ${call.errorBody.slice(0, 600)}` : ""),
    );
  }
  for (const { request, attempts } of run.requests) {
    const hops = attempts.map((a) => `${a.upstream}:${a.outcome}`).join(" → ");
    lines.push(
      `gateway row: ${request.clientFormat} ${request.route} ${request.status} ${request.outcome}` +
        ` [${hops}]${request.errorCode ? ` ${request.errorCode}: ${request.errorMessage}` : ""}`,
    );
  }
  lines.push(
    `upstream calls: good ${run.good.calls.length}` +
      (run.silent ? `, silent ${run.silent.calls.length}` : "") +
      `, side ${run.side.calls.length}`,
  );
  if (run.abort) {
    const a = run.abort;
    lines.push(
      `${a.scenario} of ${a.id} (session ${a.session}) -> ${a.controlStatus}; the agent exited ` +
        `${
          Math.round(a.exitAt - a.at)
        } ms later; upstream calls before it ${a.upstreamCallsBefore}`,
    );
  }
  if (run.fence === null) lines.push("fence replays: the stopped request was not among the calls");
  for (const r of run.fence?.results ?? []) {
    const step = "lift" in r.step ? "lift" : `replay ${r.step.replay} (want ${r.step.want})`;
    lines.push(
      `fence ${step} -> ${r.status}${r.errorCode ? ` ${r.errorCode}` : ""}` +
        `${r.shouldRetry ? ` x-should-retry: ${r.shouldRetry}` : ""}; upstream calls ` +
        `${r.upstreamCalls}${r.status >= 400 ? `: ${r.body.slice(0, 300)}` : ""}`,
    );
  }
  if (run.again) {
    const { out } = run.again;
    lines.push(
      `again in the session: exit ${out.code}${out.timedOut ? " (timed out)" : ""} in ` +
        `${(out.ms / 1000).toFixed(1)} s`,
      `$ ${run.again.command}`,
      `stdout: ${firstLines(out.stdout, 10)}`,
    );
    if (out.stderr.trim()) lines.push(`stderr: ${firstLines(out.stderr, 10)}`);
  }
  if (!run.trapHits.length) lines.push("proxy trap saw nothing");
  for (const hit of run.trapHits) {
    const why = hit.passedThrough
      ? "passed through: loopback"
      : run.tolerated[hit.host]
      ? `refused, not needed: ${run.tolerated[hit.host]}`
      : "refused, NOT EXPECTED";
    lines.push(`proxy trap saw: ${hit.method} ${hit.target} (${why})`);
  }
  return lines.join("\n");
}

function modelOf(call: TapRecord): string | undefined {
  const fromPath = /\/models\/([^/:]+):/.exec(call.path)?.[1];
  if (fromPath) return fromPath;
  try {
    const model = (JSON.parse(call.requestBody) as { model?: unknown }).model;
    return typeof model === "string" ? model : undefined;
  } catch {
    return undefined;
  }
}

export function firstLines(text: string, n: number): string {
  const lines = text.trim().split("\n");
  return lines.slice(0, n).join("\n") +
    (lines.length > n ? `\n[${lines.length - n} more lines]` : "");
}

/** The command as a person would type it: the bare command name and shell-quoted arguments. */
export function commandLine(bin: string, args: string[]): string {
  return [bin.split("/").pop(), ...args.map(quote)].join(" ");
}

function quote(arg: string): string {
  return /^[\w./:=@-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", `'\\''`)}'`;
}
