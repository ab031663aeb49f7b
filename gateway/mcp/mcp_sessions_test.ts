import assert from "node:assert/strict";
import { VirtualClock } from "../../tests/virtual_clock.ts";
import { LiveRequest } from "../live/live_request.ts";
import { Metrics } from "../runtime/metrics.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import { McpSession, McpSessions } from "./mcp_sessions.ts";

const BOUNDS = { max: 2, max_age_secs: 3600, idle_secs: 600 };

function sessions(clock: VirtualClock) {
  const ended: string[] = [];
  const table = new McpSessions(clock, {
    bounds: () => BOUNDS,
    onEnd: (s) => ended.push(s.id),
  });
  return { table, ended };
}

function opened(table: McpSessions, keyId: string | null = "k"): McpSession {
  const session = table.open({ keyId, protocolVersion: "2025-06-18" });
  assert.ok(session instanceof McpSession);
  return session;
}

Deno.test("mcp sessions: bounded in number; a full table refuses a new session, it never pushes one out", () => {
  const clock = new VirtualClock();
  const { table, ended } = sessions(clock);
  opened(table);
  opened(table);
  const third = table.open({ keyId: "k", protocolVersion: "2025-06-18" });
  assert.ok(third instanceof GatewayError);
  assert.equal(third.code, "gw.mcp.sessions_full");
  assert.equal(table.size, 2);
  assert.deepEqual(ended, []);
});

Deno.test("mcp sessions: a session is another key's unknown, ends after its idle bound, each message restarting it", async () => {
  const clock = new VirtualClock();
  const { table, ended } = sessions(clock);
  const session = opened(table, "alpha");
  assert.equal(table.get(session.id, "beta"), undefined);
  await clock.run(clock.sleep(500_000));
  assert.equal(table.get(session.id, "alpha"), session, "touched at 500 s of 600");
  await clock.run(clock.sleep(500_000));
  assert.equal(table.get(session.id, "alpha"), session, "still alive: the bound restarted");
  await clock.run(clock.sleep(600_000));
  assert.equal(table.get(session.id, "alpha"), undefined);
  assert.deepEqual(ended, [session.id]);
});

Deno.test("mcp sessions: a call in progress keeps its session past the idle bound, never past its age", async () => {
  const clock = new VirtualClock();
  const { table, ended } = sessions(clock);
  const session = opened(table);
  const live = new LiveRequest({
    id: "call-1",
    instanceId: "i",
    clientFormat: "mcp",
    route: "one__wait",
    stream: false,
    keyId: "k",
    sessionId: session.id,
  }, { clock, sink: { writeRequest: () => {}, writeAttempt: () => {} }, metrics: new Metrics() });
  session.calls.set("1", live);
  await clock.run(clock.sleep(1_200_000));
  assert.deepEqual(ended, [], "busy: kept");
  await clock.run(clock.sleep(2_400_000));
  assert.deepEqual(ended, [session.id], "ended at its age");
  assert.equal(table.size, 0);
});
