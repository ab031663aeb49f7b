/** Runs a child process to its end, or kills it when it outlives its time. */

export interface RunOutput {
  code: number;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  ms: number;
}

/** Runs a command to its end or kills it after `timeoutMs`; null when it cannot be spawned. */
export async function runWithTimeout(
  cmd: string,
  opts: {
    args: string[];
    cwd: string;
    env: Record<string, string>;
    timeoutMs: number;
    clearEnv?: boolean;
  },
): Promise<RunOutput | null> {
  const started = performance.now();
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(cmd, {
      args: opts.args,
      cwd: opts.cwd,
      env: opts.env,
      clearEnv: opts.clearEnv ?? false,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch {
    return null;
  }
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
  }, opts.timeoutMs);
  try {
    const out = await child.output();
    const decode = (b: Uint8Array) => new TextDecoder().decode(b);
    return {
      code: out.code,
      stdout: decode(out.stdout),
      stderr: decode(out.stderr),
      timedOut,
      ms: performance.now() - started,
    };
  } finally {
    clearTimeout(timer);
  }
}
