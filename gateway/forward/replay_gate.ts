import type { UpstreamFrame } from "../formats/format.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import type { Hop } from "./hop.ts";
import type { HopEnding } from "./hop_ending.ts";
import type { ReplayCheck } from "./replay_check.ts";
import type { StreamResume } from "./stream_resume.ts";

const NO_BYTES = new Uint8Array(0);

/** What a held frame came to: nothing yet, the hop's end, or the first frame to relay. */
export type Taken = null | { ending: HopEnding } | { frame: UpstreamFrame };

/**
 * A replaying hop's side of the stream pump (docs/liveness.md, "Replay"). Until its answer has
 * matched all the client already has, every frame it reads is taken here and none goes on: its
 * text is compared (replay_check.ts) and dropped, its usage kept for its own row. Its own
 * content restarts its idle timer, so its first-content and idle limits hold while the client
 * gets only keep-alives. Once it has caught up, the rest of that frame is handed back as the
 * hop's first content; if it parts first, the hop ends `replay_diverged` and nothing of it
 * was sent. Only content that matches more of the client's answer restarts the timer: frames
 * that match nothing (usage alone, empty deltas) do not keep a replay alive that never catches up.
 */
export class ReplayGate {
  #check: ReplayCheck;
  #holding = true;

  constructor(readonly hop: Hop, readonly resume: StreamResume) {
    this.#check = resume.replayCheck();
  }

  /** Whether its frames are still held and compared. */
  get holding(): boolean {
    return this.#holding;
  }

  take(frame: UpstreamFrame): Taken {
    if (frame.usage) this.#check.absorb(frame.usage);
    const before = this.#check.progress;
    const step = this.#check.push(frame.events);
    if (frame.content && (this.#check.progress > before || step.state === "caught_up")) {
      this.hop.idle.touch();
    }
    if (step.state === "matching") return null;
    if (step.state === "diverged") {
      const id = this.hop.upstream.id;
      const error = new GatewayError(
        `upstream ${id}'s replay parted from the answer the client has at character ` +
          `${step.at} of ${step.of}: ${step.why}`,
        { code: "gw.upstream.replay_diverged" },
      );
      return { ending: { how: "replay_diverged", error } };
    }
    this.#holding = false;
    this.resume.caughtUp(this.#check);
    const usage = this.#check.usage;
    return { frame: { raw: NO_BYTES, content: true, events: step.rest, usage } };
  }
}
