/**
 * The fault matrix: every fault of tests/fault_matrix/faults.ts × the faulty
 * upstream's place in the route (only candidate, first of two, last of two) ×
 * client format × streamed or whole × upstream kind (the client's own and one
 * it is translated to). Each cell's expectation is derived, not written by
 * hand: from how the faulty hop ends (the fault table) through the gateway's
 * own verdict table (gateway/forward/verdict.ts, which gateway/forward/verdict_test.ts
 * holds to docs/design.md), and checked as invariants: what the client
 * received byte for byte (one answer at most, no byte of an abandoned hop,
 * the right status and ending), the rows, which upstream was called how
 * often, cooldown, the in-flight gauge and that every upstream connection was
 * closed.
 *
 * Every group runs on a whole gateway in virtual time (tests/virtual_gateway.ts) at the real
 * defaults: a hop given up on for silence is given up on at 300 s exactly, a streamed answer held
 * open by the opening hold answers its headers at 15 s exactly, and every other cell has ended
 * before the hold. The cells of a group start together at one instant of the group's clock;
 * each instant asserted is measured from it.
 *
 * Its replay rows (tests/fault_matrix/replays.ts) run per client format and upstream kind on a
 * route that resumes by replay: the first upstream breaks after content, and the second's
 * answer matches, diverges early or late, carries the delivered tool call on, stays silent or
 * refuses; the same invariants hold, and not one byte of a replay that did not match reaches
 * the client.
 */
import assert from "node:assert/strict";
import type { UpstreamKind } from "../../gateway/formats/format.ts";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import { type ClientFormat, CLIENTS, type ClientView } from "../fault_matrix/clients.ts";
import {
  type Behaviour,
  type Fault,
  FAULT_TEXT,
  FAULTS,
  GOOD_TEXT,
} from "../fault_matrix/faults.ts";
import { WIRES } from "../fault_matrix/wire.ts";
import { firstOf, REPLAY_ROWS, type ReplayRow } from "../fault_matrix/replays.ts";
import {
  ABORT_MOMENTS,
  ABORT_WORDS,
  type AbortMoment,
  abortScript,
} from "../fault_matrix/aborts.ts";
import type { Call, Script } from "../fake_upstreams/server.ts";
import { startVirtualGateway, type VirtualGateway } from "../virtual_gateway.ts";
import { type Verdict, verdictFor } from "../../gateway/forward/verdict.ts";
import { OPENING_HOLD_MS } from "../../gateway/forward/stream_forward.ts";

/** The default idle timeout (docs/liveness.md): the matrix runs at it. */
const IDLE_MS = 300_000;
/** Far beyond any cell's own timers (the longest waits one idle window), in virtual ms. */
const CELL_LIMIT_MS = 3_600_000;
/** The cells' upstreams; the refused one is at an address no fake serves. */
const REFUSED = "http://refused.upstream.test";
/** When the first upstream of a replay row breaks off (tests/fault_matrix/replays.ts). */
const BREAK_MS = 100;
const ENV = { AWS_AK: "AKIDEXAMPLE", AWS_SK: "secret" };
const POSITIONS = ["only", "first", "last"] as const;
/** The matrix's `retries_per_candidate`. */
const RETRIES = 1;
/** `FAULT_MATRIX_ONLY=http_500,garbage_bytes` runs just those faults, when hunting one down. */
const ONLY = Deno.env.get("FAULT_MATRIX_ONLY");
type Position = typeof POSITIONS[number];
type Role = "f" | "g" | "p";

interface Cell {
  n: number;
  route: string;
  client: ClientFormat;
  kind: UpstreamKind;
  stream: boolean;
  fault: Fault;
  behaviour: Behaviour;
  position: Position;
}

interface Expected {
  status: number;
  /** The upstreams called, hop by hop. */
  hops: Role[];
  winner: Role | null;
  text: string;
  /**
   * The client hears of the failure in its stream, after a 200: for a failure
   * after content, or by the idle timer of a stream the opening hold answered
   * (at 15 s, long before the 300 s of silence); a quick failure comes before
   * the hold, as a status.
   */
  inStream: boolean;
  /** Virtual ms from sending to the answer's headers, and to its end. */
  headersAt: number | "before_hold";
  endedAt: number | "before_hold";
  paused: boolean;
  /** The faulty hop's verdict (gateway/forward/verdict.ts). */
  verdict: Verdict;
  /** The caller's own error (an upstream's 4xx passed on), not the upstream's failure. */
  callers: boolean;
}

function expected(cell: Cell): Expected {
  const b = cell.behaviour;
  // A fault that ends after content has reached the client with its first text.
  const content = b.effect === "fail_after" || b.effect === "ok";
  const verdict = verdictFor(b.how, { content, resuming: false, overflow: false });
  const fHops = verdict.step === "retry" ? 1 + RETRIES : 1;
  const movesOn = verdict.step === "retry" || verdict.step === "next";
  const failsOver = movesOn && cell.position === "first";
  const winner: Role | null = verdict.step === "done" ? "f" : failsOver ? "g" : null;
  const callers = verdict.step === "stop" && !content;
  const said = cell.fault.text ?? FAULT_TEXT;
  const early = cell.stream && cell.client.answersEarly;
  const inStream = winner === null && cell.stream && (content || (early && b.slow === true));
  // A silent hop is given up on at 300 s; what follows it (the next candidate's answer) is at
  // once. An early client's stream that has no content by 15 s gets its headers from the hold.
  const headersAt = content ? 0 : b.slow ? (early ? OPENING_HOLD_MS : IDLE_MS) : "before_hold";
  return {
    status: winner || inStream === true ? 200 : callers ? b.status ?? 400 : b.status ?? 504,
    hops: [
      ...(cell.position === "last" ? ["p" as const] : []),
      ...Array<Role>(fHops).fill("f"),
      ...(failsOver ? ["g" as const] : []),
    ],
    winner,
    text: winner === "f"
      ? said.join("")
      : winner === "g"
      ? GOOD_TEXT.join("")
      : content
      ? said[0]!
      : "",
    inStream,
    headersAt,
    endedAt: b.slow ? IDLE_MS : "before_hold",
    paused: verdict.cooldown !== undefined,
    verdict,
    callers,
  };
}

function cellsOf(client: ClientFormat, stream: boolean): Cell[] {
  const cells: Cell[] = [];
  for (const kind of client.kinds) {
    for (const fault of FAULTS.filter((f) => !ONLY || ONLY.split(",").includes(f.name))) {
      const behaviour = stream ? fault.stream : fault.whole;
      if (!behaviour || (fault.kinds && !fault.kinds.includes(kind))) continue;
      for (const position of POSITIONS) {
        const n = cells.length;
        cells.push({ n, route: `c${n}`, client, kind, stream, fault, behaviour, position });
      }
    }
  }
  // The cells that wait out an idle window first, so the quick ones fill the lanes around them
  // instead of a last few waits running alone at the end.
  return [...cells.filter((c) => c.behaviour.slow), ...cells.filter((c) => !c.behaviour.slow)];
}

const label = (c: Cell) =>
  `${c.client.name} ${c.stream ? "stream" : "whole"} ← ${c.kind} | ${c.fault.name} @${c.position}`;

/**
 * Where each role of each cell is served: the fake, an address nothing serves (a refused
 * connection: the fetch fails) and a fake that breaks every connection before any header.
 */
interface Addresses {
  fake: string;
  refused: string;
  reset: string;
}

function upstreamOf(
  cell: Cell,
  opts: { role: Role; at: Addresses },
): ConfigInput["upstreams"][number] {
  const { role, at } = opts;
  const serve = role === "f" ? cell.behaviour.serve : null;
  const origin = serve === "refused"
    ? at.refused
    : serve === "reset_before_headers"
    ? at.reset
    : at.fake;
  return upstreamAt(cell.kind, { origin, route: cell.route, role });
}

/** Upstream `${route}-${role}` of `kind`, served at `${origin}/${route}/${role}`. */
function upstreamAt(
  kind: UpstreamKind,
  opts: { origin: string; route: string; role: string },
): ConfigInput["upstreams"][number] {
  const base = `${opts.origin}/${opts.route}/${opts.role}`;
  const id = `${opts.route}-${opts.role}`;
  if (kind === "bedrock") {
    return {
      id,
      kind: "bedrock",
      base_url: base,
      region: "us-east-1",
      access_key_env: "AWS_AK",
      secret_key_env: "AWS_SK",
    };
  }
  const versioned = kind === "openai-chat" || kind === "openai-responses";
  return { id, kind, base_url: versioned ? `${base}/v1` : base };
}

function configOf(cells: Cell[], opts: { at: Addresses }): ConfigInput {
  const { at } = opts;
  const upstreams: ConfigInput["upstreams"] = [];
  const routes: ConfigInput["routes"] = [];
  for (const cell of cells) {
    const roles: Role[] = cell.position === "only"
      ? ["f"]
      : cell.position === "first"
      ? ["f", "g"]
      : ["p", "f"];
    for (const role of roles) upstreams.push(upstreamOf(cell, { role, at }));
    routes.push({
      model: cell.route,
      candidates: roles.map((role) => ({ upstream: `${cell.route}-${role}`, model: `m-${role}` })),
    });
  }
  return {
    failover: {
      failures_to_pause: 1,
      pause_secs: 600,
      max_pause_secs: 600,
      retries_per_candidate: 1,
    },
    upstreams,
    routes,
  };
}

/** The fake upstreams' answers: the fault for `f`, a good answer for `g`, a 401 for `p`. */
function scriptFor(cell: Cell, role: Role): Script {
  const wire = WIRES[cell.kind];
  const serve = cell.behaviour.serve;
  if (role === "p") return wire.error(401, "bad key");
  if (role === "g") {
    return cell.stream
      ? {
        headers: { "content-type": wire.streamType },
        body: wire.stream(GOOD_TEXT).map((send) => ({ send })),
      }
      : {
        headers: { "content-type": "application/json" },
        body: [{ send: wire.whole(GOOD_TEXT) }],
      };
  }
  if (typeof serve !== "function") throw new Error(`${label(cell)}: ${serve} reached the fake`);
  return serve(wire, cell.fault.text ?? FAULT_TEXT);
}

const CODE = /gw\.[a-z_]+\.[a-z_]+/;

async function runCell(
  cell: Cell,
  opts: { v: VirtualGateway; calls: Map<string, Call[]> },
): Promise<string[]> {
  const { v } = opts;
  const gw = v.gw;
  const want = expected(cell);
  const problems: string[] = [];
  const check = (ok: boolean, what: string) => ok || problems.push(what);
  const id = `fm-${cell.client.name}-${cell.stream ? "s" : "w"}-${cell.n}`;
  const { path, body } = cell.client.request(cell.route, cell.stream);
  // A cell that never ends is a failure to report, not a suite that hangs.
  const answered = await v.exchange(path, body, { headers: { "x-request-id": id } }).catch((
    err,
  ) => err as Error);
  if (answered instanceof Error) return [`${label(cell)}: no answer: ${answered.message}`];
  const { text } = answered;
  const res = answered;
  check(
    want.headersAt === "before_hold"
      ? res.headersAt < OPENING_HOLD_MS
      : res.headersAt === want.headersAt,
    `headers at ${res.headersAt} ms, expected ${want.headersAt}`,
  );
  check(
    want.endedAt === "before_hold" ? res.endedAt < OPENING_HOLD_MS : res.endedAt === want.endedAt,
    `ended at ${res.endedAt} ms, expected ${want.endedAt}`,
  );
  check(!res.broken, "the answer's body broke off");
  const b = cell.behaviour;
  const source = want.callers ? "client" : "upstream";
  const inStream = !want.winner && res.status === 200;
  check(
    inStream ? want.inStream : res.status === want.status,
    `status ${res.status}, expected ${want.status}: ${text.slice(0, 300)}`,
  );
  // A whole answer that is not a 200 has no answer to read: its status is the problem above.
  if ((want.winner || inStream) && (cell.stream || res.status === 200)) {
    const seen: ClientView = cell.stream ? cell.client.readStream(text) : {
      starts: 1,
      text: cell.client.wholeText(JSON.parse(text)),
      end: "done",
      trailing: false,
      calls: [],
    };
    check(seen.text === want.text, `client text ${JSON.stringify(seen.text.slice(0, 80))}`);
    check(seen.starts <= 1, `${seen.starts} answer starts`);
    check(!seen.trailing, "bytes after the end of the answer");
    check(seen.end === (want.winner ? "done" : "error"), `stream ended ${seen.end}`);
    if (inStream && b.code && !want.callers) {
      check(seen.error?.match(CODE)?.[0] === b.code, `error event ${seen.error?.slice(0, 200)}`);
    }
  } else {
    let parsed: Record<string, unknown> = {};
    try {
      parsed = JSON.parse(text);
    } catch { /* checked below */ }
    check(
      parsed.error !== undefined,
      `error body not in the client's format: ${text.slice(0, 200)}`,
    );
    check(
      res.headers.get("x-pulsegate-error") === source,
      `x-pulsegate-error ${res.headers.get("x-pulsegate-error")}`,
    );
    if (b.code && !want.callers) {
      check(text.match(CODE)?.[0] === b.code, `error body ${text.slice(0, 200)}`);
    }
  }
  const { request, attempts } = await v.rowIn(id);
  check(
    request.outcome === (want.winner ? "success" : "error"),
    `request outcome ${request.outcome}`,
  );
  if (!want.winner) {
    check(request.failureSource === source, `failure source ${request.failureSource}`);
    check(
      b.code ? request.errorCode === b.code : !!request.errorCode?.startsWith("gw.upstream."),
      `request code ${request.errorCode}`,
    );
  } else {
    check(request.upstream === `${cell.route}-${want.winner}`, `answered by ${request.upstream}`);
    check((request.outputTokens ?? 0) > 0, `output tokens ${request.outputTokens}`);
  }
  const hops = attempts.map((a) => a.upstream.slice(cell.route.length + 1));
  check(
    hops.join(",") === want.hops.join(","),
    `hops ${hops.join(",")}, expected ${want.hops.join(",")}`,
  );
  const fOutcome = want.verdict.outcome;
  for (const a of attempts) {
    const role = a.upstream.slice(cell.route.length + 1);
    const outcome = role === "f" ? fOutcome : role === "g" ? "success" : "error";
    check(
      a.outcome === outcome,
      `hop ${a.hop} (${role}) outcome ${a.outcome}, expected ${outcome}`,
    );
  }
  const paused = gw.cooldowns.isPaused(`${cell.route}-f`);
  check(paused === want.paused, `cooldown of the faulty upstream: ${paused}`);
  for (const role of ["f", "g", "p"] as const) {
    const made = opts.calls.get(`${cell.route}/${role}`) ?? [];
    const serve = role === "f" ? b.serve : null;
    if (typeof serve === "string") continue;
    const count = want.hops.filter((h) => h === role).length;
    check(made.length === count, `${role} called ${made.length} times, expected ${count}`);
    for (const call of made) {
      const how = await closedWithin(v, call);
      check(how !== "still open", `${role}'s connection was left open`);
    }
  }
  return problems.map((p) => `${label(cell)}: ${p}`);
}

/** How the gateway left an upstream call: at once, or "still open" after 5 virtual s. */
async function closedWithin(v: VirtualGateway, call: Call): Promise<string> {
  let cancel = () => {};
  const late = new Promise<string>((resolve) => {
    cancel = v.clock.after(5_000, () => resolve("still open"));
  });
  try {
    return await Promise.race([call.closed, late]);
  } finally {
    cancel();
  }
}

/**
 * Runs `cells` side by side from one instant, in virtual time; the problems found, each cell's
 * and any request left in flight.
 */
async function runAll<C>(
  v: VirtualGateway,
  opts: { cells: C[]; run: (cell: C) => Promise<string[]> },
): Promise<string[]> {
  const problems = (await v.run(Promise.all(opts.cells.map(opts.run)), { limitMs: CELL_LIMIT_MS }))
    .flat();
  const stuck = v.gw.registry.all().map((r) => `${r.record.id} (${r.state})`);
  if (v.gw.metrics.inflight !== 0) problems.push(`in flight after the matrix: ${stuck.join(", ")}`);
  return problems;
}

/** The matrix's groups, each a step on a gateway of its own over fakes of its own. */
const GROUPS: { name: string; fn: () => Promise<void> }[] = [];

/** A fake that breaks every connection before any header (its fetch rejects). */
function resetBeforeHeaders(): never {
  throw new TypeError("connection reset before any header");
}

for (const client of CLIENTS) {
  for (const stream of [true, false]) {
    if (client.streamOnly && !stream) continue;
    const cells = cellsOf(client, stream);
    if (!cells.length) continue; // FAULT_MATRIX_ONLY left none
    GROUPS.push({
      name: `${client.name} client, ${stream ? "streamed" : "whole"} (${cells.length} cells)`,
      async fn() {
        const calls = new Map<string, Call[]>();
        const byRoute = new Map(cells.map((c) => [c.route, c]));
        await using v = await startVirtualGateway({
          upstreams: 2,
          config: ([fake, reset]) =>
            configOf(cells, { at: { fake: fake!, refused: REFUSED, reset: reset! } }),
          env: ENV,
          cryptoHoldsTime: true,
        });
        const [fake, reset] = v.ups;
        fake!.setHandler((call) => {
          const [, route, role] = call.path.split("/") as [string, string, Role];
          const key = `${route}/${role}`;
          calls.set(key, [...(calls.get(key) ?? []), call]);
          return scriptFor(byRoute.get(route)!, role);
        });
        reset!.setHandler(resetBeforeHeaders);
        const problems = await runAll(v, { cells, run: (cell) => runCell(cell, { v, calls }) });
        assert.deepEqual(problems.slice(0, 40), [], `${problems.length} problems`);
      },
    });
  }
}

/** One replay cell: a client format, an upstream kind for both upstreams, a replay row. */
interface ReplayCell {
  n: number;
  route: string;
  client: ClientFormat;
  kind: UpstreamKind;
  row: ReplayRow;
}

const replayLabel = (c: ReplayCell) => `${c.client.name} stream ← ${c.kind} | ${c.row.name}`;

function replayCellsOf(client: ClientFormat): ReplayCell[] {
  return client.kinds.flatMap((kind) =>
    REPLAY_ROWS.filter((row) => !ONLY || ONLY.split(",").includes(row.name)).map((row) => ({
      client,
      kind,
      row,
    }))
  ).map((c, n) => ({ ...c, n, route: `r${n}` }));
}

/** Upstream `f` breaks after content; `r` replays. */
function replayConfig(cells: ReplayCell[], at: string): ConfigInput {
  const cfg = configOf([], { at: { fake: at, refused: at, reset: at } });
  for (const cell of cells) {
    const roles = ["f", "r"] as const;
    for (const role of roles) {
      cfg.upstreams.push(upstreamAt(cell.kind, { origin: at, route: cell.route, role }));
    }
    cfg.routes.push({
      model: cell.route,
      resume_after_content: "replay",
      candidates: roles.map((role) => ({ upstream: `${cell.route}-${role}`, model: `m-${role}` })),
    });
  }
  return cfg;
}

async function runReplayCell(
  cell: ReplayCell,
  opts: { v: VirtualGateway; calls: Map<string, Call[]> },
): Promise<string[]> {
  const { v } = opts;
  const gw = v.gw;
  const { row } = cell;
  const verdict = verdictFor(row.how, {
    content: row.how === "answered",
    resuming: true,
    overflow: false,
  });
  const mended = verdict.step === "done";
  const problems: string[] = [];
  const check = (ok: boolean, what: string) => ok || problems.push(what);
  const id = `fm-replay-${cell.client.name}-${cell.n}`;
  const { path, body } = cell.client.request(cell.route, true);
  const answered = await v.exchange(path, body, { headers: { "x-request-id": id } }).catch((
    err,
  ) => err as Error);
  if (answered instanceof Error) return [`${replayLabel(cell)}: no answer: ${answered.message}`];
  const { text } = answered;
  const res = answered;
  check(res.status === 200, `status ${res.status}`);
  // The first upstream breaks 100 ms after its content; a silent replay is given up on 300 s
  // later, and every other replay is told at once.
  const endedAt = BREAK_MS + (row.how === "idle_timeout" ? IDLE_MS : 0);
  check(res.endedAt === endedAt, `ended at ${res.endedAt} ms, expected ${endedAt}`);
  const seen = cell.client.readStream(text);
  // Not one byte of a replay that did not match: the client has what the first upstream sent.
  const want = mended ? row.whole.text : FAULT_TEXT[0]!;
  check(seen.text === want, `client text ${JSON.stringify(seen.text.slice(0, 80))}`);
  const calls = seen.calls.filter((c) => c !== undefined);
  if (mended) {
    check(
      JSON.stringify(calls) === JSON.stringify(row.whole.calls),
      `tool calls ${JSON.stringify(calls)}`,
    );
  }
  check(seen.starts <= 1, `${seen.starts} answer starts`);
  check(!seen.trailing, "bytes after the end of the answer");
  check(seen.end === (mended ? "done" : "error"), `stream ended ${seen.end}`);
  if (!mended) {
    // The original failure's error event, never the replay's.
    const code = seen.error?.match(CODE)?.[0];
    check(code === "gw.upstream.error", `error event ${seen.error?.slice(0, 200)}`);
  }
  const { request, attempts } = await v.rowIn(id);
  check(request.outcome === (mended ? "success" : "error"), `request outcome ${request.outcome}`);
  if (mended) check(request.upstream === `${cell.route}-r`, `answered by ${request.upstream}`);
  else check(request.errorCode === "gw.upstream.error", `request code ${request.errorCode}`);
  const hops = attempts.map((a) => [
    a.upstream.slice(cell.route.length + 1),
    a.outcome,
    a.errorCode,
    a.resumeOffset,
  ]);
  const expected = [
    ["f", "error", "gw.upstream.error", null],
    ["r", verdict.outcome, row.code ?? null, row.offset(cell.kind)],
  ];
  check(JSON.stringify(hops) === JSON.stringify(expected), `hops ${JSON.stringify(hops)}`);
  const paused = gw.cooldowns.isPaused(`${cell.route}-r`);
  check(
    paused === (verdict.cooldown !== undefined),
    `cooldown of the replaying upstream: ${paused}`,
  );
  for (const role of ["f", "r"] as const) {
    const made = opts.calls.get(`${cell.route}/${role}`) ?? [];
    check(made.length === 1, `${role} called ${made.length} times, expected 1`);
    for (const call of made) {
      const how = await closedWithin(v, call);
      check(how !== "still open", `${role}'s connection was left open`);
    }
  }
  // The replay was sent the original request: nothing of the delivered answer in it.
  const sent = JSON.stringify(opts.calls.get(`${cell.route}/r`)?.[0]?.json ?? null);
  check(!sent.includes("Fault"), `the replay was sent a prefill: ${sent.slice(0, 200)}`);
  return problems.map((p) => `${replayLabel(cell)}: ${p}`);
}

for (const client of CLIENTS) {
  const cells = replayCellsOf(client);
  if (!cells.length) continue; // FAULT_MATRIX_ONLY left none
  GROUPS.push({
    name: `${client.name} client, replays (${cells.length} cells)`,
    async fn() {
      const calls = new Map<string, Call[]>();
      const byRoute = new Map(cells.map((c) => [c.route, c]));
      await using v = await startVirtualGateway({
        config: ([fake]) => replayConfig(cells, fake!),
        env: ENV,
        cryptoHoldsTime: true,
      });
      v.ups[0]!.setHandler((call) => {
        const [, route, role] = call.path.split("/") as [string, string, "f" | "r"];
        const key = `${route}/${role}`;
        calls.set(key, [...(calls.get(key) ?? []), call]);
        const cell = byRoute.get(route)!;
        const wire = WIRES[cell.kind];
        return role === "f" ? firstOf(cell.row, wire) : cell.row.replay(wire);
      });
      const problems = await runAll(v, { cells, run: (cell) => runReplayCell(cell, { v, calls }) });
      assert.deepEqual(problems.slice(0, 40), [], `${problems.length} problems`);
    },
  });
}

/** One abort cell: a client format, an upstream kind, and when the operator stops it. */
interface AbortCell {
  n: number;
  route: string;
  client: ClientFormat;
  kind: UpstreamKind;
  moment: AbortMoment;
  stream: boolean;
}

const ABORT_ADMIN = "fault-matrix-admin";

const abortLabel = (c: AbortCell) => `${c.client.name} ← ${c.kind} | abort ${c.moment}`;

function abortCells(): AbortCell[] {
  const cells: AbortCell[] = [];
  for (const client of CLIENTS) {
    for (const kind of client.kinds) {
      for (const moment of ABORT_MOMENTS) {
        const stream = moment === "mid_stream" || client.streamOnly === true;
        const n = cells.length;
        cells.push({ n, route: `a${n}`, client, kind, moment, stream });
      }
    }
  }
  return cells;
}

async function runAbortCell(
  cell: AbortCell,
  opts: { v: VirtualGateway; calls: Map<string, Call[]> },
): Promise<string[]> {
  const { v } = opts;
  const gw = v.gw;
  const problems: string[] = [];
  const check = (ok: boolean, what: string) => ok || problems.push(what);
  const words = ABORT_WORDS[cell.client.name]!;
  const id = `fm-abort-${cell.n}`;
  const { path, body } = cell.client.request(cell.route, cell.stream);
  const called = () => (opts.calls.get(`${cell.route}/f`) ?? []).length > 0;
  const live = () =>
    cell.moment === "before_any_byte"
      ? called() && gw.registry.has(id)
      : gw.registry.get(id)?.state === "streaming";
  const got = await (async () => {
    const answered = v.exchange(path, body, {
      // Every cell sends the same conversation: a session of its own keeps the turn fence an
      // earlier cell's abort left (docs/design.md "Abort and disconnect") off the next ones.
      headers: { "x-request-id": id, "x-session-id": id },
    });
    // The operator stops it as soon as it is live, long before the opening hold's 15 s.
    while (!live()) await v.clock.sleep(1);
    const control = await v.fetch(`${v.url}/request/${id}/abort`, {
      method: "POST",
      headers: { authorization: `Bearer ${ABORT_ADMIN}` },
    });
    return { control, controlBody: await control.text(), answer: await answered };
  })().catch((err) => err as Error);
  if (got instanceof Error) return [`${abortLabel(cell)}: no answer: ${got.message}`];
  const { control, controlBody, answer: res } = got;
  check(control.status === 200, `the abort answered ${control.status}`);
  const fence = control.status === 200 ? JSON.parse(controlBody).fence : controlBody;
  check(fence?.kind === "turn", `the abort left no turn fence: ${JSON.stringify(fence)}`);
  const { text } = res;
  if (cell.moment === "before_any_byte") {
    check(res.status === words.status, `status ${res.status}, expected ${words.status}`);
    check(res.headers.get("x-should-retry") === "false", "no x-should-retry: false");
    check(res.headers.get("x-pulsegate-error") === "aborted", "x-pulsegate-error");
    check(words.said.test(text), `error body ${text.slice(0, 300)}`);
  } else {
    check(res.status === 200, `status ${res.status}`);
    const seen = cell.client.readStream(text);
    check(seen.end === "error", `stream ended ${seen.end}`);
    check(words.said.test(seen.error ?? ""), `error event ${seen.error?.slice(0, 300)}`);
    check(seen.text === FAULT_TEXT[0], `client text ${JSON.stringify(seen.text)}`);
    check(!seen.trailing, "bytes after the error");
    if (words.streamEnding) {
      check(words.streamEnding.test(text), `the stream's ending: ${text.slice(-400)}`);
    }
  }
  const { request, attempts } = await v.rowIn(id);
  check(request.errorCode === "gw.request.aborted", `request code ${request.errorCode}`);
  check(request.status === 499, `row status ${request.status}`);
  check(request.failureSource === "aborted", `failure source ${request.failureSource}`);
  check(attempts.length === 1 && attempts[0]!.outcome === "aborted", "one aborted hop");
  for (const call of opts.calls.get(`${cell.route}/f`) ?? []) {
    const how = await closedWithin(v, call);
    check(how === "cancelled", `the upstream's connection: ${how}`);
  }
  return problems.map((p) => `${abortLabel(cell)}: ${p}`);
}

if (!ONLY || ONLY.split(",").includes("abort")) {
  const cells = abortCells();
  GROUPS.push({
    name: `operator aborts (${cells.length} cells)`,
    async fn() {
      const calls = new Map<string, Call[]>();
      const byRoute = new Map(cells.map((c) => [c.route, c]));
      const config = (fake: string) => {
        const c = configOf([], { at: { fake, refused: fake, reset: fake } });
        for (const cell of cells) {
          c.upstreams.push(upstreamAt(cell.kind, { origin: fake, route: cell.route, role: "f" }));
          c.routes.push({
            model: cell.route,
            candidates: [{ upstream: `${cell.route}-f`, model: "m-f" }],
          });
        }
        return c;
      };
      await using v = await startVirtualGateway({
        config: ([fake]) => config(fake!),
        env: { ...ENV, PULSEGATE_ADMIN_TOKEN: ABORT_ADMIN },
        cryptoHoldsTime: true,
      });
      v.ups[0]!.setHandler((call) => {
        const [, route, role] = call.path.split("/") as [string, string, Role];
        const key = `${route}/${role}`;
        calls.set(key, [...(calls.get(key) ?? []), call]);
        const cell = byRoute.get(route)!;
        return abortScript(WIRES[cell.kind], cell.moment, cell.stream);
      });
      const problems = await runAll(v, { cells, run: (cell) => runAbortCell(cell, { v, calls }) });
      assert.deepEqual(problems.slice(0, 40), [], `${problems.length} problems`);
    },
  });
}

Deno.test("fault matrix: every fault, in every place, through every client and kind", async (t) => {
  let failed = 0;
  for (const group of GROUPS) {
    if (!await t.step(group.name, group.fn)) failed++;
  }
  assert.equal(failed, 0, `${failed} of ${GROUPS.length} groups failed`);
});
