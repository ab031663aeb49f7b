/**
 * What every agent test shares: a throwaway home, the proxy trap, a real gateway (behind a tap
 * that notes each call) over fake upstreams, one headless run of the agent, and the assertions
 * of the two scenarios. An agent file only says how its agent is configured and launched.
 */
import assert from "node:assert/strict";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import { listAttemptsFor, listRequests } from "../../db/history_queries.ts";
import type { AttemptRecord, RequestRecord } from "../../db/records.ts";
import { eventually, startTestGateway, type TestGateway } from "../harness.ts";
import { type FakeUpstream, startFakeUpstream } from "../fake_upstreams/server.ts";
import { silentAfterHeaders } from "../fake_upstreams/openai_chat_script.ts";
import { type AgentInstall, type AgentName, checkAgent, installAgents } from "./install_agents.ts";
import { type RunOutput, runWithTimeout } from "./run_command.ts";
import { startProxyTrap, type TrapHit } from "./proxy_trap.ts";
import { type AgentHome, makeAgentHome } from "./agent_home.ts";
import { commandLine, describeRun, firstLines } from "./run_report.ts";
import { type GatewayTap, startGatewayTap, type TapRecord } from "./gateway_tap.ts";
import {
  answerFor,
  type AnswerKind,
  slowAnswerFor,
  UPSTREAM_MODEL,
  UPSTREAM_PATHS,
} from "./fake_answers.ts";
import {
  ABORT_SCENARIOS,
  type AbortEvent,
  type AbortScenario,
  type AbortScenarioName,
  ADMIN_TOKEN,
  type AgainRun,
  assertAbortScenario,
  type FenceRun,
  SLOW_ANSWER,
  stopMidStream,
} from "./abort_scenario.ts";
import { runFenceSteps } from "./fence_replay.ts";

/**
 * Four runs per agent: an agent's start-up is most of a run's cost (opencode: ~8 s of CPU), and
 * failing over from a silent upstream of the agent's own kind to one of another kind covers the
 * translated answer and the failover in one run (and the seam between them: nothing of the first
 * attempt may reach the agent). The other two stop a turn mid-stream as an operator does, by
 * request and by session (abort_scenario.ts), through an upstream of the agent's own kind.
 */
export type ScenarioName = "same-format" | "failover" | AbortScenarioName;
export const SCENARIOS: readonly ScenarioName[] = [
  "same-format",
  "failover",
  ...ABORT_SCENARIOS.map((s) => s.name),
];

const abortScenario = (name: ScenarioName) => ABORT_SCENARIOS.find((s) => s.name === name);

/**
 * Scenarios that fail today for a known gateway translation bug another change is fixing.
 * They are registered with `ignore: true` and this reason printed; delete an entry once its
 * fix is merged. PULSEGATE_AGENTS_RUN_BROKEN=1 runs them anyway, to check a fix.
 */
export const KNOWN_BROKEN: ReadonlyMap<string, string> = new Map<string, string>([]);

const RUN_BROKEN = Deno.env.get("PULSEGATE_AGENTS_RUN_BROKEN") === "1";

/** The route the agents are pointed at; the failover scenario puts the silent upstream first. */
export const ROUTE = "smart";
export const GATEWAY_KEY = "pg-agent-test-key-0123456789";
const KEY_ENV = "PULSEGATE_KEY_AGENT_TEST";

/** An agent's whole run, start-up included; generous: an agent's cold start is slow. */
const RUN_TIMEOUT_MS = 90_000;

export interface LaunchContext {
  /** Where the agent must send its calls (the tap in front of the gateway). */
  gatewayUrl: string;
  key: string;
  route: string;
  prompt: string;
  home: AgentHome;
}

export interface AgentLaunch {
  args: string[];
  env?: Record<string, string>;
}

export interface AgentSpec {
  name: AgentName;
  /** Upstream kind of the same-format scenario and of the failover scenario's silent upstream. */
  sameKind: AnswerKind;
  /** Upstream kind that answers in the failover scenario, after the silent one. */
  translatedKind: AnswerKind;
  /**
   * Model names the agent asks for on its own besides the one it is told to use (titles,
   * quota checks, routing): each gets a route to the answering upstream.
   */
  sideModels?: readonly string[];
  /**
   * Hosts the agent tries to reach on its own even with every documented switch off, each with
   * why it does not need them. The trap refuses them like any other; they are printed, and any
   * host not listed here fails the test.
   */
  toleratedHosts?: Readonly<Record<string, string>>;
  /** Writes the agent's config files into the home and says how to start it. */
  launch(ctx: LaunchContext): Promise<AgentLaunch>;
  /**
   * How to start the agent again in the session the gateway recorded for its first run, after
   * an operator lifted the fence on it (abort_scenario.ts). Every agent here can be pointed at
   * its session from the command line or the environment.
   */
  resume(ctx: LaunchContext, session: string): AgentLaunch;
}

export interface ScenarioRun {
  command: string;
  /** The kind of the answering upstream (and of the side models' upstream). */
  kind: AnswerKind;
  /** The kind of the silent upstream, when there is one. */
  silentKind: AnswerKind;
  out: RunOutput;
  expected: string;
  good: FakeUpstream;
  silent: FakeUpstream | null;
  /** Answers the side models, so their calls never touch the failover route's upstreams. */
  side: FakeUpstream;
  calls: TapRecord[];
  trapHits: TrapHit[];
  tolerated: Readonly<Record<string, string>>;
  requests: { request: RequestRecord; attempts: AttemptRecord[] }[];
  /** The operator's stop, in an abort scenario (null: the agent ended before any content). */
  abort?: AbortEvent | null;
  /** The replays of the stopped request through the fence the stop left. */
  fence?: FenceRun | null;
  /** The agent started again in the stopped request's session once its fence was lifted. */
  again?: AgainRun | null;
}

const PROMPT = "Reply with the exact text the gateway test expects.";

/** Registers the two scenarios of one agent, skipped loudly when it cannot run here. */
export async function registerAgentTests(spec: AgentSpec): Promise<void> {
  const install = await installAgents();
  reportInstall(install);
  const agent = await checkAgent(install, spec.name);
  for (const scenario of SCENARIOS) {
    const id = `${spec.name}:${scenario}`;
    const skip = !agent.ok
      ? `SKIPPED: ${id}: ${agent.reason}`
      : KNOWN_BROKEN.has(id) && !RUN_BROKEN
      ? `SKIPPED (known broken): ${id}: ${KNOWN_BROKEN.get(id)}`
      : null;
    if (skip) console.log(skip);
    Deno.test({
      name: `${id}: ${describe(spec, scenario)}`,
      ignore: skip !== null,
      async fn() {
        if (!agent.ok) return;
        const run = await runScenario(spec, { scenario, bin: agent.bin });
        try {
          console.log(describeRun(id, run));
          await assertScenario(run, scenario);
        } finally {
          await closeFakes(run);
        }
      },
    });
  }
}

function describe(spec: AgentSpec, scenario: ScenarioName): string {
  if (scenario === "same-format") return `answers through an upstream of kind ${spec.sameKind}`;
  const abort = abortScenario(scenario);
  if (abort) return `${abort.describe} (upstream of kind ${spec.sameKind})`;
  return `an upstream of kind ${spec.sameKind} silent after its headers fails over to one of ` +
    `kind ${spec.translatedKind}`;
}

function reportInstall(install: AgentInstall): void {
  const how = install.installSecs ? `installed in ${install.installSecs.toFixed(1)} s` : "cached";
  const mb = (install.sizeBytes / 1e6).toFixed(0);
  console.log(`coding agents ${how}, ${mb} MB in ${install.root}`);
}

/** One headless run of the agent through a fresh gateway, fakes, trap and home. */
export async function runScenario(
  spec: AgentSpec,
  opts: { scenario: ScenarioName; bin: string },
): Promise<ScenarioRun> {
  const { scenario } = opts;
  const kind = scenario === "failover" ? spec.translatedKind : spec.sameKind;
  const silentKind = spec.sameKind;
  const expected = `Pulsegate answer for ${spec.name} ${scenario}: 4217.`;
  const abort = abortScenario(scenario);
  const fakes = {
    good: startFakeUpstream({
      fallback: abort ? slowAnswerFor(kind, SLOW_ANSWER) : answerFor(kind, expected),
    }),
    silent: scenario === "failover"
      ? startFakeUpstream({ fallback: () => silentAfterHeaders })
      : null,
    side: startFakeUpstream({ fallback: answerFor(kind, expected) }),
  };
  const trap = startProxyTrap();
  let gw: TestGateway | null = null;
  let tap: GatewayTap | null = null;
  const root = await Deno.makeTempDir({ prefix: `pulsegate-${spec.name}-` });
  try {
    const gatewayDir = `${root}/gateway`;
    await Deno.mkdir(gatewayDir);
    gw = await startTestGateway(gatewayConfig(spec, { kind, silentKind, ...fakes }), {
      env: { [KEY_ENV]: GATEWAY_KEY, PULSEGATE_ADMIN_TOKEN: ADMIN_TOKEN },
      dir: gatewayDir,
    });
    tap = startGatewayTap(gw.url);
    const home = await makeAgentHome(root, trap);
    const ctx = { gatewayUrl: tap.url, key: GATEWAY_KEY, route: ROUTE, prompt: PROMPT, home };
    const launch = await spec.launch(ctx);
    const running = runWithTimeout(opts.bin, {
      args: launch.args,
      cwd: home.work,
      env: { ...home.env, ...launch.env },
      clearEnv: true,
      timeoutMs: RUN_TIMEOUT_MS,
    });
    const stop = abort
      ? await stopMidStream(gw, { scenario: abort, route: ROUTE, running, good: fakes.good })
      : undefined;
    const out = await running;
    if (!out) throw new Error(`${opts.bin} could not be started`);
    // A stopped stream's last words may still be on their way when the agent has read enough.
    await eventually(() => gw!.registry.size === 0, { ms: 10_000 }).catch(() => {});
    const fence = abort && stop
      ? await replayThroughFence(gw, { abort, stop, calls: tap.records, ...fakes, kind, expected })
      : undefined;
    const again = fence && stop?.session
      ? await runAgain(gw, { launch: spec.resume(ctx, stop.session), bin: opts.bin, home })
      : undefined;
    await gw.writer.flush();
    const rows = (await listRequests(gw.db, { limit: 100 })).reverse();
    const chains = await listAttemptsFor(gw.db, rows.map((r) => r.id));
    return {
      kind,
      silentKind,
      command: commandLine(opts.bin, launch.args),
      out,
      expected,
      ...fakes,
      calls: tap.records,
      trapHits: trap.hits,
      tolerated: spec.toleratedHosts ?? {},
      requests: rows.map((request) => ({ request, attempts: chains.get(request.id) ?? [] })),
      abort: stop,
      fence,
      again,
    };
  } catch (e) {
    await closeFakes(fakes);
    throw e;
  } finally {
    await tap?.close();
    await gw?.stop();
    await trap.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
}

/**
 * The fence's steps (fence_replay.ts), once the agent has exited: the answering upstream now
 * answers at once, so a replay the fence lets through costs no more than a fetch.
 */
async function replayThroughFence(
  gw: TestGateway,
  opts: {
    abort: AbortScenario;
    stop: AbortEvent;
    calls: TapRecord[];
    good: FakeUpstream;
    kind: AnswerKind;
    expected: string;
  },
): Promise<FenceRun | null> {
  const aborted = opts.calls.find((c) => c.requestId === opts.stop.id);
  if (!aborted) return null;
  opts.good.setHandler(answerFor(opts.kind, opts.expected));
  const upstreamCallsBefore = opts.good.calls.length;
  const results = await runFenceSteps(gw, {
    expect: opts.abort.expect,
    aborted,
    controlBody: opts.stop.controlBody,
    good: opts.good,
    adminToken: ADMIN_TOKEN,
  });
  return { aborted, upstreamCallsBefore, results };
}

/** One more run of the agent, to its end, and the gateway's requests of it ended too. */
async function runAgain(
  gw: TestGateway,
  opts: { launch: AgentLaunch; bin: string; home: AgentHome },
): Promise<AgainRun> {
  const at = performance.now();
  const out = await runWithTimeout(opts.bin, {
    args: opts.launch.args,
    cwd: opts.home.work,
    env: { ...opts.home.env, ...opts.launch.env },
    clearEnv: true,
    timeoutMs: RUN_TIMEOUT_MS,
  });
  if (!out) throw new Error(`${opts.bin} could not be started again`);
  await eventually(() => gw.registry.size === 0, { ms: 10_000 }).catch(() => {});
  return { command: commandLine(opts.bin, opts.launch.args), at, out };
}

async function closeFakes(fakes: Pick<ScenarioRun, "good" | "silent" | "side">): Promise<void> {
  await Promise.all([fakes.good.close(), fakes.silent?.close(), fakes.side.close()]);
}

function gatewayConfig(
  spec: AgentSpec,
  at: Pick<ScenarioRun, "kind" | "silentKind" | "good" | "silent" | "side">,
): ConfigInput {
  const model = UPSTREAM_MODEL;
  // Priced, so that a billed row shows a cost and a fence's refusal shows that it has none.
  const prices = { [model]: { input: 3, output: 15 } };
  const main = [
    ...(at.silent ? [{ id: "silent", kind: at.silentKind, base_url: at.silent.url, prices }] : []),
    { id: "good", kind: at.kind, base_url: at.good.url, prices },
  ];
  return {
    // 100 s at the test scale is 1 s of silence: the silent upstream is given up on quickly, and
    // the good one's answer fits in it whole.
    failover: { idle_timeout_secs: 100 },
    // An hour each (36 s at the test scale): a fence outlives the steps that replay, renew and
    // lift it; its length is tested in virtual time (gateway/live/fences_test.ts).
    abort: { session_fence_secs: 3600, turn_fence_secs: 3600 },
    upstreams: [...main, { id: "side", kind: at.kind, base_url: at.side.url, prices }],
    routes: [
      { model: ROUTE, candidates: main.map((u) => ({ upstream: u.id, model })) },
      ...(spec.sideModels ?? []).map((side) => ({
        model: side,
        candidates: [{ upstream: "side", model }],
      })),
    ],
    keys: [{ id: "agents", key_env: KEY_ENV }],
  };
}

/** Exit 0, the answer on stdout, the route answered by the right upstream, nothing outside. */
export async function assertScenario(run: ScenarioRun, scenario: ScenarioName): Promise<void> {
  const abort = abortScenario(scenario);
  if (abort) {
    assertAbortScenario({
      ...run,
      scenario: abort,
      abort: run.abort ?? null,
      fence: run.fence ?? null,
      again: run.again ?? null,
      route: ROUTE,
      mainRows: run.requests.map((r) => r.request).filter((r) => r.route === ROUTE),
    });
    return assertTrap(run);
  }
  assert.equal(run.out.timedOut, false, `the agent was killed after ${RUN_TIMEOUT_MS / 1000} s`);
  assert.equal(run.out.code, 0, `exit code; stderr:\n${firstLines(run.out.stderr, 20)}`);
  assert.ok(
    run.out.stdout.includes(run.expected),
    `stdout lacks the answer ${JSON.stringify(run.expected)}:\n${firstLines(run.out.stdout, 20)}`,
  );
  assertTrap(run);
  const main = run.requests.filter((r) => r.request.route === ROUTE);
  assert.ok(main.length >= 1, "the agent asked for the route it was given");
  for (const { request } of main) {
    assert.equal(request.outcome, "success", `request ${request.id}: ${request.errorMessage}`);
    assert.equal(request.upstream, "good");
  }
  assert.ok(run.good.calls.length >= 1, "the answering upstream was called");
  const calls = [
    ...run.good.calls.map((call) => ({ call, kind: run.kind })),
    ...(run.silent?.calls ?? []).map((call) => ({ call, kind: run.silentKind })),
  ];
  for (const { call, kind } of calls) {
    assert.match(call.path, UPSTREAM_PATHS[kind], `${kind} upstream got ${call.path}`);
    assert.ok(
      call.body.includes(PROMPT),
      `the prompt reached the upstream: ${call.body.slice(0, 300)}`,
    );
  }
  if (scenario !== "failover") {
    assert.ok(main.every((r) => r.attempts.length === 1), "one attempt per request");
    return;
  }
  assert.equal(main.length, 1, "the agent asked the failover route once");
  assert.deepEqual(
    main[0]!.attempts.map((a) => [a.upstream, a.outcome]),
    [["silent", "idle_timeout"], ["good", "success"]],
  );
  assert.equal(run.silent?.calls.length, 1, "the silent upstream was called once");
  assert.equal(
    await within(run.silent.calls[0]!.closed, 10_000),
    "cancelled",
    "the gateway closed the silent upstream's connection",
  );
}

function assertTrap(run: ScenarioRun): void {
  const unexpected = run.trapHits.filter((h) => !h.passedThrough && !(h.host in run.tolerated));
  assert.deepEqual(unexpected, [], "the agent tried to reach hosts it was not known to");
}

/** The promise's value, or "pending" when it has not settled within `ms`. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | "pending"> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"pending">((r) => (timer = setTimeout(() => r("pending"), ms)));
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}
