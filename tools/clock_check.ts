/**
 * Time is a dependency (docs/architecture.md "Time"): in gateway/, admin/ and db/ every wait and
 * every reading of the time goes through a `Clock` (gateway/runtime/clock.ts). This check, run by
 * `deno task check` and tests/clock_check_test.ts, finds what bypasses it: a raw timer, a raw
 * reading of the time, or arithmetic with a time scale outside the clock's own module.
 */

/** Files allowed to touch the runtime's timers: the clock, and the admin page's browser root. */
export const CLOCK_FILES: readonly string[] = [
  "gateway/runtime/clock.ts",
  // The browser's composition root builds the page's I/O (timers included) and hands it to the
  // islands, as the gateway's start hands its clock to every component.
  "admin/client/main.tsx",
  // A worker started from one function's source (a data: URL) can import nothing: its one
  // timer bounds SQLite's real work, which is what real time is for.
  "db/read_worker.ts",
];

const RULES: readonly { what: string; pattern: RegExp }[] = [
  { what: "a raw timer", pattern: /\b(?:setTimeout|setInterval|setImmediate)\s*\(/ },
  { what: "a raw reading of the time", pattern: /\b(?:Date|performance)\.now\b|new Date\(\s*\)/ },
  { what: "time-scale arithmetic", pattern: /\bclock\.scale\b|\.unscale\s*\(|\bTIME_SCALE\b/ },
];

/** Every line that bypasses the clock: "path:line: a raw timer: <text>". */
export async function clockBypasses(root: URL): Promise<string[]> {
  const found: string[] = [];
  for (const top of ["gateway/", "admin/", "db/"]) {
    for await (const path of sources(root, top)) {
      if (CLOCK_FILES.includes(path) || /_test\.tsx?$/.test(path) || path.endsWith(".gen.ts")) {
        continue;
      }
      const lines = (await Deno.readTextFile(new URL(path, root))).split("\n");
      lines.forEach((line, at) => {
        const code = line.replace(/\/\/.*$/, "");
        if (/^\s*(?:\/\*|\*)/.test(code)) return;
        for (const rule of RULES) {
          if (rule.pattern.test(code)) {
            found.push(`${path}:${at + 1}: ${rule.what}: ${line.trim()}`);
          }
        }
      });
    }
  }
  return found;
}

async function* sources(root: URL, dir: string): AsyncGenerator<string> {
  for await (const entry of Deno.readDir(new URL(dir, root))) {
    const path = `${dir}${entry.name}`;
    if (entry.isDirectory) {
      if (entry.name !== "node_modules") yield* sources(root, `${path}/`);
    } else if (/\.tsx?$/.test(entry.name)) yield path;
  }
}

if (import.meta.main) {
  const found = await clockBypasses(new URL("../", import.meta.url));
  if (found.length) {
    console.error(`${found.length} lines bypass the clock (tools/clock_check.ts):`);
    for (const line of found) console.error(`  ${line}`);
    Deno.exit(1);
  }
}
