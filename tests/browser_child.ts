/**
 * What the admin's browser tests share. playwright-core needs every permission, so under the
 * suite each such file runs itself again in a child `deno test --allow-all`; only the child
 * imports playwright and drives Debian's Chromium.
 */
import assert from "node:assert/strict";
import type { Browser } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";
const CHILD_ENV = "PULSEGATE_BROWSER_TEST_CHILD";
/** Whether this process is the child that drives the browser. */
const inChild = Deno.env.get(CHILD_ENV) === "1";
export const hasChromium = await Deno.stat(CHROMIUM).then(() => true, () => false);

/**
 * Registers `def` in the child, and in the suite a test named `parentName` that runs the file
 * at `moduleUrl` as that child and passes when the child's summary matches `ran`.
 */
export function browserTest(
  moduleUrl: string,
  def: Deno.TestDefinition,
  opts: { parentName: string; ran: RegExp; what: string },
): void {
  if (inChild) {
    Deno.test({ ignore: !hasChromium, ...def });
    return;
  }
  Deno.test({
    name: opts.parentName,
    ignore: !hasChromium,
    async fn() {
      const out = await new Deno.Command(Deno.execPath(), {
        // tests/type_check_test.ts type-checks the suite; the child only executes.
        args: ["test", "--allow-all", "--no-check", new URL(moduleUrl).pathname],
        cwd: new URL("..", import.meta.url).pathname,
        env: { [CHILD_ENV]: "1", NO_COLOR: "1" },
        stdout: "piped",
        stderr: "piped",
      }).output();
      const decoder = new TextDecoder();
      const log = decoder.decode(out.stdout) + decoder.decode(out.stderr);
      console.log(log.replace(/^.*__proto__.*\n.*unsafe-proto.*\n/gm, ""));
      assert.equal(out.code, 0, "the browser test failed: its output is above");
      assert.match(log, opts.ran, opts.what);
    },
  });
}

/** Headless Chromium with the flags this workplace's machines need (no sandbox, no GPU). */
export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import("playwright-core");
  return await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
}
