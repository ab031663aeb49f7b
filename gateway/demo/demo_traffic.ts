import { REAL_TIME } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";

/**
 * `deno task demo`: sends a few requests to the demo route and prints what
 * happened to each, so failover and cooldown are visible without a client.
 */
export async function driveDemoTraffic(
  url: string,
  opts: { rounds?: number; print?: (line: string) => void; log?: Logger } = {},
): Promise<void> {
  const print = opts.print ?? ((line: string) => console.log(line));
  for (let i = 1; i <= (opts.rounds ?? 6); i++) {
    const started = REAL_TIME.now();
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "demo",
        stream: i % 2 === 0,
        messages: [{ role: "user", content: `demo request ${i}` }],
      }),
    });
    const text = await res.text();
    const secs = ((REAL_TIME.now() - started) / 1000).toFixed(1);
    const said = text.length > 160 ? `${text.slice(0, 160)}…` : text;
    print(`demo #${i}: ${res.status} in ${secs}s (request ${res.headers.get("x-request-id")})`);
    print(`  ${said.replaceAll("\n", " ")}`);
  }
  print(`history and live requests: ${url}/admin`);
}
