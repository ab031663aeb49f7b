/**
 * An operator stops an agent's turn mid-stream: the upstream streams a slow but healthy answer,
 * and once its first content has gone through the gateway the test aborts the live request (or
 * its session) as the admin page's buttons do. The agent must take the abort's error as final
 * (docs/design.md "Abort and disconnect"): it exits or reports the stop soon after, the turn
 * reaches the upstream no more, and the history has the aborted row.
 *
 * Each stop is a row of ABORT_SCENARIOS. Its `expect` is the fence the stop must leave, checked
 * once the agent has exited with the agent's own aborted request (fence_replay.ts): re-sent as it
 * was and as Claude Code re-sends, it is refused with the fence's code; a new turn passes a turn
 * fence; after the operator lifts the fence the session is answered again.
 */
import assert from "node:assert/strict";
import type { TestGateway } from "../harness.ts";
import type { FakeUpstream } from "../fake_upstreams/server.ts";
import type { RunOutput } from "./run_command.ts";
import type { TapRecord } from "./gateway_tap.ts";
import type { RequestRecord } from "../../db/records.ts";
import type { LiveRequest } from "../../gateway/live/live_request.ts";
import { assertFenceSteps, type FenceExpect, type StepResult } from "./fence_replay.ts";

export type AbortScenarioName = "request-abort" | "session-abort";

export interface AbortScenario {
  name: AbortScenarioName;
  describe: string;
  /** The control call that stops the live request. */
  stopPath(live: LiveRequest): string;
  /** The fence the stop leaves, and what replays of the stopped request get from it. */
  expect: FenceExpect;
}

export const ABORT_SCENARIOS: readonly AbortScenario[] = [
  {
    name: "request-abort",
    describe: "an operator's request abort mid-stream is final: the agent stops, no re-send; " +
      "its turn fence refuses the agent's request sent again, passes a new turn, lifts",
    stopPath: (live) => `/request/${encodeURIComponent(live.record.id)}/abort`,
    expect: {
      kind: "turn",
      code: "gw.turn.fenced",
      steps: [
        { replay: "as-sent", want: "refused" },
        { replay: "re-sent", want: "refused" },
        // A turn fence stops that turn only: the session goes on.
        { replay: "new-turn", want: "answered" },
        { lift: true },
        { replay: "as-sent", want: "answered" },
      ],
    },
  },
  {
    name: "session-abort",
    describe: "an operator's session abort mid-stream is final: the agent stops, no re-send; " +
      "its session fence refuses the agent's request sent again and a new turn, lifts",
    stopPath: (live) => {
      const session = live.record.sessionId;
      assert.ok(session, `the agent's request ${live.record.id} names no session to abort`);
      return `/sessions/${encodeURIComponent(session)}/abort`;
    },
    expect: {
      kind: "session",
      code: "gw.session.fenced",
      steps: [
        { replay: "as-sent", want: "refused" },
        { replay: "re-sent", want: "refused" },
        // A session fence stops the session's every turn, a new one too.
        { replay: "new-turn", want: "refused" },
        { lift: true },
        { replay: "as-sent", want: "answered" },
      ],
    },
  },
];

export const ADMIN_TOKEN = "pg-agent-test-admin-0123456789";

/**
 * The slow answer: long enough that an agent still waiting for it is plainly not stopped (12 s),
 * quick enough between words that the gateway's idle timeout (1 s at the test scale) never fires.
 */
export const SLOW_ANSWER = { pieces: 40, gapMs: 300 };

/** How long after the abort the agent may take to exit or say it stopped (the bound). */
export const STOP_WITHIN_MS = 5_000;

/** How long the agent may take to start and reach the first content. */
const FIRST_CONTENT_MS = 60_000;

export interface AbortEvent {
  scenario: AbortScenarioName;
  /** The stopped request and its session. */
  id: string;
  session: string | null;
  /** performance.now() of the control call, and of the agent's exit. */
  at: number;
  exitAt: number;
  controlStatus: number;
  controlBody: string;
  /** Calls the answering upstream had when the abort was sent. */
  upstreamCallsBefore: number;
}

/**
 * Waits until the agent's turn on `route` streams content to it, then stops it; resolves once the
 * agent has exited. Null when the agent ended before any content (the assertions say why).
 */
export async function stopMidStream(
  gw: TestGateway,
  opts: {
    scenario: AbortScenario;
    route: string;
    running: Promise<RunOutput | null>;
    good: FakeUpstream;
  },
): Promise<AbortEvent | null> {
  let exitAt = 0;
  const ended = opts.running.then(() => (exitAt = performance.now()));
  const live = await streamingOn(gw, { route: opts.route, ended });
  if (!live) return null;
  const upstreamCallsBefore = opts.good.calls.length;
  const at = performance.now();
  const res = await fetch(`${gw.url}${opts.scenario.stopPath(live)}`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  const controlBody = await res.text();
  await ended;
  return {
    scenario: opts.scenario.name,
    id: live.record.id,
    session: live.record.sessionId,
    at,
    exitAt,
    controlStatus: res.status,
    controlBody,
    upstreamCallsBefore,
  };
}

/** The live request of `route` whose content has started reaching the agent, or null. */
async function streamingOn(
  gw: TestGateway,
  opts: { route: string; ended: Promise<unknown> },
): Promise<LiveRequest | null> {
  let over = false;
  void opts.ended.then(() => (over = true));
  const deadline = performance.now() + FIRST_CONTENT_MS;
  while (!over && performance.now() < deadline) {
    const live = gw.registry.all().find((l) =>
      l.record.route === opts.route && l.state === "streaming"
    );
    if (live) return live;
    await new Promise((r) => setTimeout(r, 25));
  }
  return null;
}

/** The fence's steps, run once the agent had exited; null when its request was not found. */
export interface FenceRun {
  aborted: TapRecord;
  /** Calls the answering upstream had before the first replay: the agent's all. */
  upstreamCallsBefore: number;
  results: StepResult[];
}

/** The agent started again in the stopped request's session, once its fence was lifted. */
export interface AgainRun {
  command: string;
  /** performance.now() when it was started: the calls from then on are its. */
  at: number;
  out: RunOutput;
}

/** What an abort run must show, whatever the agent. */
export function assertAbortScenario(run: {
  scenario: AbortScenario;
  out: RunOutput;
  abort: AbortEvent | null;
  fence: FenceRun | null;
  again: AgainRun | null;
  expected: string;
  good: FakeUpstream;
  calls: TapRecord[];
  route: string;
  mainRows: RequestRecord[];
}): void {
  const { abort, out } = run;
  assert.ok(abort, `the agent ended before its answer's first content reached it`);
  assert.equal(abort.controlStatus, 200, `the abort: ${abort.controlBody}`);
  assert.match(abort.controlBody, new RegExp(abort.id));
  assert.equal(out.timedOut, false, "the agent was still running when it was killed");
  const tookMs = Math.round(abort.exitAt - abort.at);
  assert.ok(
    tookMs <= STOP_WITHIN_MS,
    `the agent exited ${tookMs} ms after the abort (at most ${STOP_WITHIN_MS})`,
  );
  const said = `${out.stdout}\n${out.stderr}`;
  assert.match(said, /aborted by an operator/, "the agent tells its user the operator stopped it");
  assert.equal(
    run.fence?.upstreamCallsBefore ?? run.good.calls.length,
    abort.upstreamCallsBefore,
    "the upstream got no call after the abort: the agent did not re-send the turn",
  );
  const againAt = run.again?.at ?? Infinity;
  const after = run.calls.filter((c) =>
    c.at >= abort.at && c.at < againAt && isOnRoute(c, run.route)
  );
  assert.deepEqual(
    after.map((c) => `${c.method} ${c.path} -> ${c.status}`),
    [],
    "the agent sent nothing more on its route after the abort",
  );
  const stopped = run.mainRows.find((r) => r.id === abort.id);
  assert.ok(stopped, `no history row for the stopped request ${abort.id}`);
  assert.equal(stopped.outcome, "error");
  assert.equal(stopped.errorCode, "gw.request.aborted");
  assert.equal(stopped.failureSource, "aborted");
  assert.match(stopped.errorMessage ?? "", /aborted by an operator/);
  assert.ok(run.fence, `the gateway tap saw no call answered as ${abort.id}`);
  assertFenceSteps({
    expect: run.scenario.expect,
    aborted: run.fence.aborted,
    results: run.fence.results,
    controlBody: abort.controlBody,
    stopped,
    rows: run.mainRows,
  });
  assertAgain({ ...run, again: run.again, session: stopped.sessionId });
}

/** The agent's next run in the session, after the lift, is answered through it. */
function assertAgain(run: {
  again: AgainRun | null;
  session: string | null;
  expected: string;
  calls: TapRecord[];
  route: string;
  mainRows: RequestRecord[];
}): void {
  const { again } = run;
  assert.ok(again, "the agent was not started again in its session after the lift");
  assert.equal(again.out.timedOut, false, "the agent started again was killed");
  assert.equal(again.out.code, 0, `the agent started again: ${again.out.stderr.slice(0, 2000)}`);
  assert.ok(
    again.out.stdout.includes(run.expected),
    `the agent started again printed no answer: ${again.out.stdout.slice(0, 2000)}`,
  );
  const calls = run.calls.filter((c) => c.at >= again.at && isOnRoute(c, run.route));
  assert.ok(calls.length >= 1, "the agent started again asked its route");
  for (const call of calls) {
    const row = run.mainRows.find((r) => r.id === call.requestId);
    assert.equal(call.status, 200, `${call.method} ${call.path}: ${call.errorBody}`);
    assert.ok(row, `no history row for ${call.requestId}`);
    assert.equal(row.sessionId, run.session, "the agent started again is in the same session");
    assert.equal(row.outcome, "success");
  }
}

/** Whether a call to the gateway asked for `route` (in its body, or Gemini's path). */
export function isOnRoute(call: TapRecord, route: string): boolean {
  if (call.path.includes(`/models/${route}:`)) return true;
  try {
    return (JSON.parse(call.requestBody) as { model?: unknown }).model === route;
  } catch {
    return false;
  }
}
