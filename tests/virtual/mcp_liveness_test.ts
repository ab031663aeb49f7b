/**
 * A tool server's liveness at its real durations (docs/mcp.md "Tool calls: liveness and
 * failover"), a whole gateway in virtual time: the SDK client and an SDK-built tool server reach
 * it in-process, so the idle timeout, the pause, its doubling and the half-open probe are each
 * checked at the exact instant they happen.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client";
// The SDK's wildcard export names no types for a `.js` path: the import says where they are.
// @ts-types="@modelcontextprotocol/sdk/client/streamableHttp"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import { readSettings } from "../../gateway/start/settings.ts";
import { type Gateway, startGateway } from "../../gateway/start/start_gateway.ts";
import { freshDatabase } from "../fresh_database.ts";
import { VirtualClock } from "../virtual_clock.ts";
import { type FakeMcp, inProcessFetch, startFakeMcp } from "../fake_mcp/sdk_server.ts";

const INFO = {
  remoteAddr: { transport: "tcp", hostname: "127.0.0.1", port: 40_000 },
  completed: Promise.resolve(),
} as unknown as Deno.ServeHandlerInfo<Deno.NetAddr>;

/** A gateway on `clock` whose fetch reaches `fake` in-process, and an SDK client of it. */
async function mcpGateway(clock: VirtualClock, opts: { fake: FakeMcp; config: ConfigInput }) {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-virtual-mcp-" });
  await freshDatabase(`${dir}/pulsegate.db`);
  const env = () => undefined;
  const gw: Gateway = await clock.run(startGateway({
    settings: {
      ...readSettings(env),
      host: "127.0.0.1",
      port: 0,
      dbUrl: `file:${dir}/pulsegate.db`,
    },
    env,
    configFile: opts.config,
    quiet: true,
    historyThread: "this",
    listen: false,
    clock,
    fetch: inProcessFetch([opts.fake]),
  }));
  const client = new Client({ name: "virtual", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL("http://127.0.0.1/mcp"), {
    fetch: async (input, init) => await gw.handler(new Request(input, init), INFO),
  });
  await clock.run(client.connect(transport));
  return {
    gw,
    client,
    async [Symbol.asyncDispose]() {
      await clock.run(client.close());
      await clock.run(gw.shutdown());
      await opts.fake.close();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

function config(url: string): ConfigInput {
  return {
    upstreams: [{ id: "unused", kind: "openai-chat", base_url: "http://127.0.0.1:9/v1" }],
    routes: [{ model: "m", candidates: [{ upstream: "unused", model: "m" }] }],
    mcp_servers: [{
      id: "one",
      url,
      failover: {
        idle_timeout_secs: 60,
        failures_to_pause: 1,
        pause_secs: 30,
        max_pause_secs: 600,
      },
    }],
  };
}

/** The JSON-RPC code a call ended with (null: answered) and the virtual ms it took. */
async function timedCall(clock: VirtualClock, client: Client) {
  const at = clock.now();
  const code = await clock.run(
    client.callTool({ name: "one__lookup", arguments: { key: "k" } })
      .then(() => null, (err: Error & { code?: number }) => err.code ?? 0),
  );
  return { code, ms: clock.now() - at };
}

Deno.test("mcp in virtual time: a silent server is given up on at 60 s exactly, paused 30 s, probed once, the pause doubled, closed by a good probe", async () => {
  const clock = new VirtualClock();
  const fake = startFakeMcp({ name: "one", tools: ["lookup"], inProcess: true });
  await using m = await mcpGateway(clock, { fake, config: config(fake.url) });
  await clock.run(m.client.listTools());
  const cooldowns = m.gw.mcp.cooldowns(m.gw.state.config!.mcp_servers[0]!);
  fake.mode = "silent";
  const first = await timedCall(clock, m.client);
  assert.deepEqual(first, { code: -32011, ms: 60_000 }, "idle timeout at 60 s, not before");
  assert.equal(cooldowns.phase("one#1"), "paused");
  // Paused: refused at once, nothing sent.
  assert.deepEqual(await timedCall(clock, m.client), { code: -32012, ms: 0 });
  assert.equal(fake.calls.length, 1);
  await clock.run(clock.sleep(29_000));
  assert.deepEqual(
    await timedCall(clock, m.client),
    { code: -32012, ms: 0 },
    "still paused at 29 s",
  );
  await clock.run(clock.sleep(1_000));
  assert.equal(cooldowns.phase("one#1"), "probing");
  // The half-open probe: sent, silent again, so paused for twice as long.
  assert.deepEqual(await timedCall(clock, m.client), { code: -32011, ms: 60_000 });
  assert.equal(fake.calls.length, 2);
  assert.equal(cooldowns.get("one#1").pauseCount, 2);
  await clock.run(clock.sleep(59_000));
  assert.deepEqual(
    await timedCall(clock, m.client),
    { code: -32012, ms: 0 },
    "60 s pause: at 59 s",
  );
  await clock.run(clock.sleep(1_000));
  fake.mode = "answer";
  assert.deepEqual(await timedCall(clock, m.client), { code: null, ms: 0 }, "the probe answers");
  assert.equal(cooldowns.phase("one#1"), "ok");
  assert.equal(cooldowns.get("one#1").pauseCount, 0, "a success closes it");
  assert.deepEqual(await timedCall(clock, m.client), { code: null, ms: 0 });
});

Deno.test("mcp in virtual time: each progress notification restarts the idle timer; silence after the last ends the call 60 s later", async () => {
  const clock = new VirtualClock();
  const fake = startFakeMcp({
    name: "one",
    tools: ["wait"],
    inProcess: true,
    progress: { clock, everyMs: 50_000, count: 3 },
  });
  await using m = await mcpGateway(clock, { fake, config: config(fake.url) });
  await clock.run(m.client.listTools());
  const at = clock.now();
  const progress: number[] = [];
  const code = await clock.run(
    m.client.callTool({ name: "one__wait", arguments: {} }, undefined, {
      onprogress: () => progress.push(clock.now() - at),
    }).then(() => null, (err: Error & { code?: number }) => err.code ?? 0),
  );
  // Relayed as they came; each within the 60 s idle window of the one before.
  assert.deepEqual(progress, [0, 50_000, 100_000, 150_000]);
  assert.equal(code, -32010, "wait is not read-only: it may have run");
  assert.equal(clock.now() - at, 210_000, "60 s after the last progress, not 60 s after the start");
  assert.equal(fake.cancelled.length, 1, "the server was told to cancel");
});
