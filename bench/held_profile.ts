/**
 * Where pulsegate's CPU goes while thousands of held streams get their content (scenario 4's
 * largest count), profiled in a run of its own after the scenarios: the profile starts before the
 * streams open (starting it over a large heap stalls the thread for a moment, which would show as
 * late frames), and only the samples after the fake releases the streams are summed.
 */
import type { BenchContext } from "./context.ts";
import { loadJob } from "./context.ts";
import { type CpuProfile, nodesAfter, summarizeProfile } from "./hot_path.ts";
import type { HeldJobResult } from "./load/held_streams.ts";
import type { HotPathProfile } from "./results.ts";
import { heldJob, heldMode, startHeldGateway } from "./scenarios/held_streams.ts";
import { round } from "./stats.ts";

const SAMPLING_US = 500;

/** Watches the fake's count of held streams; answers when it first falls from its peak. */
async function releaseTime(fake: string, opts: { count: number; until: Promise<unknown> }) {
  let peak = 0;
  let done = false;
  void opts.until.finally(() => (done = true));
  while (!done) {
    const held = (await (await fetch(`${fake}/_held`)).json()).held as number;
    peak = Math.max(peak, held);
    if (peak >= opts.count * 0.99 && held < peak) return performance.now();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return null;
}

export async function profileHeldContent(ctx: BenchContext): Promise<HotPathProfile | null> {
  const count = Math.max(...ctx.profile.held.counts);
  const gw = await startHeldGateway(ctx, { name: "pulsegate_held_profiled" });
  const control = gw.ready.control;
  try {
    if (!control) throw new Error("the gateway gave no control port");
    await (await fetch(`${control}/profile/start?us=${SAMPLING_US}`, { method: "POST" })).json();
    const started = performance.now();
    const job = heldJob(ctx, { target: "pulsegate", proxy: gw, count, mode: heldMode(ctx) });
    const run = loadJob<HeldJobResult>(ctx, {
      script: "held_streams.ts",
      job,
      timeoutMs: job.holdTimeoutMs + job.endTimeoutMs + 30_000,
    });
    const released = await releaseTime(ctx.stack.fake.url, { count, until: run });
    const result = await run;
    const ended = performance.now();
    const stopped = await (await fetch(`${control}/profile/stop`, { method: "POST" })).json() as {
      profile: CpuProfile;
    };
    if (released === null) throw new Error("the fake never released the held streams");
    const fromUs = (released - started) * 1000;
    const seconds = (ended - released) / 1000;
    ctx.log(`held content profile: ${count} streams, ${round(seconds, 1)} s after the release`);
    return {
      route: "held",
      stream: true,
      history: true,
      concurrency: count,
      seconds: round(seconds, 1),
      // Frames relayed per second after the release.
      rps: round((result.count * ctx.profile.held.deltas) / seconds, 0),
      ...summarizeProfile(nodesAfter(stopped.profile, fromUs)),
    };
  } catch (err) {
    ctx.log(`held content profile failed: ${(err as Error).message}`);
    return null;
  } finally {
    await gw.stop();
  }
}
