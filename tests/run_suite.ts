/**
 * `deno task test`: runs the suite's shards (tests/suite.ts) as separate `deno test` processes side
 * by side, each line of their output prefixed with its shard's letter, and fails if any failed.
 * Processes rather than `deno test --parallel`'s threads: the fault matrix's replay groups, run
 * on a thread beside another shard, saw a fake upstream's reset as silence (docs/architecture.md
 * "Tests").
 */
import { shardModule, SHARDS } from "./suite.ts";

const ROOT = new URL("..", import.meta.url).pathname;

async function relay(stream: ReadableStream<Uint8Array>, prefix: string, out: typeof Deno.stdout) {
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  let buffered = "";
  for await (const chunk of stream) {
    buffered += decoder.decode(chunk, { stream: true });
    const lines = buffered.split("\n");
    buffered = lines.pop()!;
    if (lines.length) await out.write(encoder.encode(lines.map((l) => `${prefix}${l}\n`).join("")));
  }
  if (buffered) await out.write(encoder.encode(`${prefix}${buffered}\n`));
}

/**
 * With PULSEGATE_JUNIT_DIR set, each shard also writes its JUnit report there (suite_a.xml, …):
 * each test's time under the test's own file, which is how `FILE_SECONDS` is measured.
 */
function junitArgs(module: string): string[] {
  const dir = Deno.env.get("PULSEGATE_JUNIT_DIR");
  return dir ? [`--junit-path=${dir}/${module.slice("tests/".length, -".ts".length)}.xml`] : [];
}

async function runShard(index: number, children: Deno.ChildProcess[]): Promise<number> {
  const module = shardModule(index);
  const child = new Deno.Command(Deno.execPath(), {
    args: ["test", "--no-check", "-A", ...junitArgs(module), module, ...Deno.args],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  children.push(child);
  const prefix = `${module.slice(-4, -3)}│ `;
  await Promise.all([
    relay(child.stdout, prefix, Deno.stdout),
    relay(child.stderr, prefix, Deno.stderr),
  ]);
  return (await child.status).code;
}

if (import.meta.main) {
  const children: Deno.ChildProcess[] = [];
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(signal, () => {
      for (const child of children) {
        try {
          child.kill(signal);
        } catch { /* already gone */ }
      }
    });
  }
  const codes = await Promise.all(
    Array.from({ length: SHARDS }, (_, i) => runShard(i, children)),
  );
  const failed = codes.flatMap((code, i) => code === 0 ? [] : [shardModule(i)]);
  console.log(failed.length ? `FAILED: ${failed.join(", ")}` : `ok: ${SHARDS} shards passed`);
  Deno.exit(failed.length ? 1 : 0);
}
