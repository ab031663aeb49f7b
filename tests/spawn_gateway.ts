/** Starts `main.ts` as its own process, the way `deno task start` does. */

const ROOT = new URL("..", import.meta.url).pathname;

/** The permissions `deno task start` gives main.ts, with reads and writes limited to `dir`. */
export function narrowPermissions(dir: string): string[] {
  return [
    "--allow-net",
    "--allow-env",
    `--allow-read=${dir}`,
    `--allow-write=${dir}`,
    "--allow-ffi",
    "--allow-sys",
    `--allow-run=${Deno.execPath()}`,
  ];
}

export interface SpawnedGateway {
  child: Deno.ChildProcess;
  url: string;
  /** stderr up to the listening line. */
  log: string;
}

/**
 * Resolves once the gateway says it listens. Its stderr keeps being drained
 * afterwards, so the child never blocks on a full pipe.
 */
export async function spawnGateway(
  dir: string,
  opts: { permissions?: string[]; env?: Record<string, string> } = {},
): Promise<SpawnedGateway> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", ...(opts.permissions ?? narrowPermissions(dir)), "main.ts"],
    cwd: ROOT,
    env: { PULSEGATE_PORT: "0", PULSEGATE_DB_URL: `file:${dir}/pulsegate.db`, ...opts.env },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  return { child, ...(await untilListening(child)) };
}

/**
 * Reads a gateway process's stderr up to its listening line. Its stderr keeps
 * being drained afterwards, so the child never blocks on a full pipe.
 */
export async function untilListening(
  child: Deno.ChildProcess,
): Promise<{ url: string; log: string }> {
  const lines = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let log = "";
  for (;;) {
    const { value, done } = await lines.read();
    if (done) throw new Error(`gateway exited before listening:\n${log}`);
    log += value;
    const url = log.match(/pulsegate listening on (http:\/\/\S+)/)?.[1];
    if (url) {
      (async () => {
        while (!(await lines.read()).done) { /* drain */ }
      })();
      return { url, log };
    }
  }
}

/**
 * A peer that never answers (an instance hung, or a host gone quiet): each call is held until
 * its caller gives up. Registered in the instances table, it shows what a bounded wait on a peer
 * does.
 */
export function startHungPeer(): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (req) =>
      new Promise<Response>((resolve) => {
        req.signal.addEventListener("abort", () => resolve(new Response(null, { status: 499 })));
      }),
  );
}
