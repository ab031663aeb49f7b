/**
 * Child processes of the bench: long-running services (fake upstream, proxies) and one-shot load
 * jobs. Each runs under `sh` so its file limit can be raised (5,000 held streams need 10,000
 * sockets in the proxy) and, where `taskset` exists, pinned to its cores.
 */

import { processCpuMs } from "./thread_cpu.ts";

/** Which cores the proxy under test gets, and which the load generator and the fake share. */
export interface Layout {
  proxyCpus: string | null;
  loadCpus: string | null;
  /** The file limit asked for; the shell falls back to the hard limit when refused. */
  nofile: number;
  /** Where service stderr goes, one file per service, for when something breaks. */
  logDir: string;
}

export interface SpawnSpec {
  name: string;
  cmd: string[];
  cpus: string | null;
  env?: Record<string, string>;
  cwd?: string;
  /**
   * For a service that prints no JSON ready line (Portkey): the text that says it listens, and
   * the url it listens on.
   */
  readyWhen?: { pattern: RegExp; url: string };
}

/** Wraps a command so the shell raises the file limit, then pins it, then execs (same pid). */
function wrapped(spec: SpawnSpec, layout: Layout): string[] {
  const pin = spec.cpus ? ["taskset", "-c", spec.cpus] : [];
  const script = `ulimit -n ${layout.nofile} 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$@"`;
  return ["sh", "-c", script, "sh", ...pin, ...spec.cmd];
}

export class Service {
  #child: Deno.ChildProcess;
  #exited: Promise<Deno.CommandStatus>;

  private constructor(
    readonly name: string,
    child: Deno.ChildProcess,
    readonly ready: Record<string, string>,
  ) {
    this.#child = child;
    this.#exited = child.status;
  }

  /** Starts a service and waits (at most `timeoutMs`) for its one-line JSON ready message. */
  static async start(
    spec: SpawnSpec,
    opts: { layout: Layout; timeoutMs?: number },
  ): Promise<Service> {
    const [cmd, ...args] = wrapped(spec, opts.layout);
    const log = await Deno.open(`${opts.layout.logDir}/${spec.name}.log`, {
      write: true,
      create: true,
      append: true,
    });
    const child = new Deno.Command(cmd!, {
      args,
      cwd: spec.cwd,
      env: spec.env,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    void child.stderr.pipeTo(log.writable).catch(() => {});
    const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    const timeoutMs = opts.timeoutMs ?? 30_000;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${spec.name} did not start within ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    try {
      const ready = await Promise.race([readyLine(lines, spec), timeout]);
      // Keep draining stdout so a chatty service never blocks on a full pipe.
      void (async () => {
        while (!(await lines.read()).done) { /* drain */ }
      })().catch(() => {});
      return new Service(spec.name, child, ready);
    } catch (err) {
      try {
        child.kill("SIGKILL");
      } catch { /* already gone */ }
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  get pid(): number {
    return this.#child.pid;
  }

  get url(): string {
    const url = this.ready.url;
    if (!url) throw new Error(`${this.name} gave no url`);
    return url;
  }

  /** Resident memory of the process, from /proc. */
  async rssBytes(): Promise<number> {
    const status = await Deno.readTextFile(`/proc/${this.pid}/status`);
    const kb = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
    return kb ? Number(kb) * 1024 : NaN;
  }

  /** User + system CPU time the process has used so far, in ms (see processCpuMs). */
  cpuMs(): Promise<number> {
    return processCpuMs(this.pid);
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves when the process is gone. */
  async stop(graceMs = 5_000): Promise<void> {
    try {
      this.#child.kill("SIGTERM");
    } catch {
      return; // already exited
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), graceMs);
    });
    if ((await Promise.race([this.#exited, late])) === "late") {
      try {
        this.#child.kill("SIGKILL");
      } catch { /* gone meanwhile */ }
      await this.#exited;
    }
    clearTimeout(timer);
  }
}

async function readyLine(
  lines: ReadableStreamDefaultReader<string>,
  spec: SpawnSpec,
): Promise<Record<string, string>> {
  let text = "";
  for (let reads = 0; reads < 10_000; reads++) {
    const { value, done } = await lines.read();
    if (done) throw new Error(`${spec.name} exited before it was ready:\n${text.slice(-2000)}`);
    text += value;
    if (spec.readyWhen) {
      if (spec.readyWhen.pattern.test(text)) return { url: spec.readyWhen.url };
      continue;
    }
    for (const line of text.split("\n")) {
      if (!line.startsWith("{")) continue;
      try {
        return JSON.parse(line) as Record<string, string>;
      } catch { /* not the ready line yet */ }
    }
  }
  throw new Error(`${spec.name} printed no ready line`);
}

/**
 * Runs a one-shot job (a load generator) to completion within `timeoutMs` and answers its
 * stdout: the last line that parses as JSON. A job that overruns is killed: no loop is unbounded.
 */
export async function runJob(
  spec: SpawnSpec,
  opts: { layout: Layout; timeoutMs: number },
): Promise<unknown> {
  const [cmd, ...args] = wrapped(spec, opts.layout);
  const child = new Deno.Command(cmd!, {
    args,
    cwd: spec.cwd,
    env: spec.env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const timer = setTimeout(() => {
    try {
      child.kill("SIGKILL");
    } catch { /* finished meanwhile */ }
  }, opts.timeoutMs);
  const out = await child.output();
  clearTimeout(timer);
  const stdout = new TextDecoder().decode(out.stdout);
  const stderr = new TextDecoder().decode(out.stderr);
  if (stderr.trim()) {
    await Deno.writeTextFile(`${opts.layout.logDir}/${spec.name}.log`, stderr, { append: true });
  }
  if (!out.success) {
    throw new Error(
      `${spec.name} failed (${out.code}${out.signal ? ` ${out.signal}` : ""}):\n` +
        stderr.slice(-2000),
    );
  }
  const last = stdout.trim().split("\n").reverse().find((line) => line.startsWith("{"));
  if (!last) throw new Error(`${spec.name} printed no JSON result:\n${stdout.slice(-2000)}`);
  return JSON.parse(last);
}

/** A port free right now, for a service that cannot be told to pick its own (Portkey). */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}
