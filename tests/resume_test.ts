import assert from "node:assert/strict";
import { startTestGateway, type TestGateway } from "./harness.ts";
import { type FakeUpstream, startFakeUpstream } from "./fake_upstreams/server.ts";
import {
  type Fault,
  type PrefillKind,
  RESUME_ENV,
  RESUME_SCRIPTS,
  SECOND_USAGE,
  upstreamEntry,
} from "./fake_upstreams/resume_scripts.ts";
import { type ClientFormat, CLIENTS } from "./resume_clients.ts";
import type { ConfigInput } from "../gateway/config/schema.ts";

/** What the client already had when the first answer broke: "Hello, wor". */
const OFFSET = 10;

/** The first hop's row, per fault: outcome and code. */
const FIRST_ROW: Record<Fault, { outcome: string; code?: string }> = {
  reset: { outcome: "error", code: "gw.upstream.error" },
  stall: { outcome: "idle_timeout", code: "gw.upstream.idle_timeout_mid_stream" },
  error: { outcome: "error" },
};

interface Upstreams {
  kind: PrefillKind;
  /** Whether each upstream (in route order) takes a prefill. */
  prefill: boolean[];
}

function resumeConfig(urls: string[], opts: Upstreams & { resume?: boolean }): ConfigInput {
  return {
    failover: { idle_timeout_secs: 30 },
    upstreams: urls.map((url, i) => upstreamEntry(opts.kind, { id: `up${i + 1}`, url })),
    routes: [{
      model: "smart",
      resume_after_content: opts.resume === false ? null : "prefill",
      candidates: urls.map((_, i) => ({
        upstream: `up${i + 1}`,
        model: `model-${i + 1}`,
        accepts_prefill: opts.prefill[i] ?? false,
      })),
    }],
  };
}

async function withGateway(
  count: number,
  opts: Upstreams & { resume?: boolean },
  run: (gw: TestGateway, ups: FakeUpstream[]) => Promise<void>,
): Promise<void> {
  const ups = Array.from({ length: count }, () => startFakeUpstream());
  const gw = await startTestGateway(resumeConfig(ups.map((u) => u.url), opts), {
    env: RESUME_ENV,
  });
  try {
    await run(gw, ups);
  } finally {
    await gw.stop();
    await Promise.all(ups.map((u) => u.close()));
  }
}

let seq = 0;
const requestId = () => `resume-${++seq}-${Date.now()}`;

const FORMATS: ClientFormat[] = ["anthropic", "openai-chat", "openai-responses", "gemini"];
const KINDS: PrefillKind[] = ["anthropic", "openai-chat", "gemini", "bedrock"];
const FAULTS: Fault[] = ["reset", "stall", "error"];

for (const format of FORMATS) {
  for (const kind of KINDS) {
    for (const fault of FAULTS) {
      Deno.test(`${format} client, ${kind} upstreams: ${fault} after content resumes with a prefill`, async () => {
        const scripts = RESUME_SCRIPTS[kind];
        await withGateway(2, { kind, prefill: [false, true] }, async (gw, [first, second]) => {
          first!.enqueue(scripts.first(fault));
          second!.enqueue(scripts.second());
          const id = requestId();
          const read = await CLIENTS[format](gw.url, { requestId: id });
          assert.equal(read.error, undefined);
          assert.equal(read.text, "Hello, world!");
          assert.equal(read.starts, 1);
          assert.equal(read.ends, 1);
          // One content index throughout: the continuation went on in the block it continues.
          assert.deepEqual([...new Set(read.indexes)].length, 1, `indexes ${read.indexes}`);
          // The second upstream was asked to continue exactly what the client has.
          assert.equal(second!.calls.length, 1);
          assert.deepEqual(scripts.lastTurn(second!.calls[0]!), {
            role: "assistant",
            text: "Hello, wor",
          });
          const { request, attempts } = await gw.row(id);
          assert.equal(request.outcome, "success");
          assert.equal(attempts.length, 2);
          const [hop1, hop2] = attempts;
          assert.equal(hop1!.outcome, FIRST_ROW[fault].outcome);
          if (FIRST_ROW[fault].code) assert.equal(hop1!.errorCode, FIRST_ROW[fault].code);
          else assert.ok(hop1!.errorCode, "the in-stream error's code is on the first hop");
          assert.equal(hop1!.resumeOffset, null);
          assert.equal(hop2!.outcome, "resumed");
          assert.equal(hop2!.resumeOffset, OFFSET);
          // Usage is summed over the hops: on the row and in what the client read.
          const input = (hop1!.inputTokens ?? 0) + (hop2!.inputTokens ?? 0);
          const output = (hop1!.outputTokens ?? 0) + (hop2!.outputTokens ?? 0);
          assert.equal(input, SECOND_USAGE.input + (scripts.firstReported.input ?? 0));
          assert.equal(output, SECOND_USAGE.output + (scripts.firstReported.output ?? 0));
          assert.equal(request.inputTokens, input);
          assert.equal(request.outputTokens, output);
          assert.equal(read.usage.input, input);
          if (format !== "gemini") assert.equal(read.usage.output, output);
        });
      });
    }
  }
}
