/**
 * The fence an operator's abort leaves, checked with the agent's own bytes. The agents take the
 * abort as final and re-send nothing (abort_scenario.ts), so the retry the fence is there for is
 * sent here instead: the aborted request, with the headers and body the agent sent, straight to
 * the gateway, as it was and as Claude Code re-sends a turn (not streamed, another token limit);
 * then a new turn of the session, and the same request again after an operator lifts the fence
 * (docs/design.md "Abort and disconnect", docs/admin.md "Fences"). Each step is a plain fetch:
 * no agent is started again.
 */
import assert from "node:assert/strict";
import type { AbortResult } from "../../admin/api_types.ts";
import type { GatewayCode } from "../../gateway/runtime/error_codes.ts";
import type { RequestRecord } from "../../db/records.ts";
import type { TestGateway } from "../harness.ts";
import type { FakeUpstream } from "../fake_upstreams/server.ts";
import type { TapRecord } from "./gateway_tap.ts";

/**
 * How the aborted request is sent again: `as-sent`, its bytes; `re-sent`, as Claude Code re-sends
 * a turn whose stream failed (`stream: false`, or Gemini's `:generateContent`; another token
 * limit); `new-turn`, with one more user message: the next turn of the same conversation.
 */
export type ReplayName = "as-sent" | "re-sent" | "new-turn";

/** One step of a fence's check: a replay and what it must get, or the operator's lift. */
export type FenceStep =
  | { replay: ReplayName; want: "refused" | "answered" }
  | { lift: true };

export interface FenceExpect {
  kind: "turn" | "session";
  /** The code every request the fence catches is refused with. */
  code: Extract<GatewayCode, "gw.turn.fenced" | "gw.session.fenced">;
  steps: readonly FenceStep[];
}

/** What one step got. */
export interface StepResult {
  step: FenceStep;
  status: number;
  /** The refusal's body (the answer's first bytes when answered). */
  body: string;
  shouldRetry: string | null;
  errorCode: string | null;
  requestId: string | null;
  /** Calls the answering upstream got during the step. */
  upstreamCalls: number;
}

type ClientFormat = "anthropic" | "openai-responses" | "openai-chat" | "gemini";

/**
 * The status a final error goes out with, per client format (docs/design.md "An abort the agent
 * takes as final"): Anthropic keeps 499, since Claude Code re-sends a 400.
 */
const FINAL_STATUS: Record<ClientFormat, number> = {
  "anthropic": 499,
  "openai-responses": 400,
  "openai-chat": 400,
  "gemini": 400,
};

/** The token limit of each format, set to another value by a `re-sent` replay. */
const LIMIT_FIELD: Record<Exclude<ClientFormat, "gemini">, string> = {
  "anthropic": "max_tokens",
  "openai-responses": "max_output_tokens",
  "openai-chat": "max_tokens",
};

const NEW_TURN = "One more question after the stop: still there?";

/** The client format of a call to the gateway, by its path. */
export function formatOf(path: string): ClientFormat {
  if (/\/models\/[^/]+:(stream)?[gG]enerateContent/.test(path)) return "gemini";
  if (path.startsWith("/v1/messages")) return "anthropic";
  if (path.startsWith("/v1/responses")) return "openai-responses";
  if (path.startsWith("/v1/chat/completions")) return "openai-chat";
  throw new Error(`no client format known for ${path}`);
}

type Body = Record<string, unknown>;

/** The path and body of a replay of `call`. */
export function replayOf(call: TapRecord, name: ReplayName): { path: string; body: string } {
  if (name === "as-sent") return { path: call.path, body: call.requestBody };
  const format = formatOf(call.path);
  const body = JSON.parse(call.requestBody) as Body;
  if (name === "new-turn") {
    return { path: call.path, body: JSON.stringify(withNewTurn(format, body)) };
  }
  if (format === "gemini") {
    const config = (body.generationConfig ?? {}) as Body;
    const path = call.path.replace(/:streamGenerateContent(\?alt=sse)?/, ":generateContent");
    const generationConfig = { ...config, maxOutputTokens: otherLimit(config.maxOutputTokens) };
    return { path, body: JSON.stringify({ ...body, generationConfig }) };
  }
  const field = LIMIT_FIELD[format];
  const limitField = format === "openai-chat" && "max_completion_tokens" in body
    ? "max_completion_tokens"
    : field;
  const { stream_options: _, ...rest } = body;
  return {
    path: call.path,
    body: JSON.stringify({ ...rest, stream: false, [limitField]: otherLimit(body[limitField]) }),
  };
}

function otherLimit(limit: unknown): number {
  return typeof limit === "number" && limit !== 1000 ? 1000 : 2000;
}

function withNewTurn(format: ClientFormat, body: Body): Body {
  const list = (field: string) => {
    const value = body[field];
    assert.ok(Array.isArray(value), `the agent's ${field} is not a list`);
    return value as unknown[];
  };
  switch (format) {
    case "anthropic":
    case "openai-chat":
      return { ...body, messages: [...list("messages"), { role: "user", content: NEW_TURN }] };
    case "openai-responses": {
      const input = typeof body.input === "string"
        ? [{ type: "message", role: "user", content: [{ type: "input_text", text: body.input }] }]
        : list("input");
      const turn = {
        type: "message",
        role: "user",
        content: [{ type: "input_text", text: NEW_TURN }],
      };
      return { ...body, input: [...input, turn] };
    }
    case "gemini":
      return {
        ...body,
        contents: [...list("contents"), { role: "user", parts: [{ text: NEW_TURN }] }],
      };
  }
}

/**
 * Runs the steps against the gateway: each replay straight to it (not through the tap: what
 * the agent itself sent stays apart), each lift with the admin token on the fence the abort named.
 */
export async function runFenceSteps(
  gw: TestGateway,
  opts: {
    expect: FenceExpect;
    aborted: TapRecord;
    controlBody: string;
    good: FakeUpstream;
    adminToken: string;
  },
): Promise<StepResult[]> {
  const results: StepResult[] = [];
  for (const step of opts.expect.steps) {
    const before = opts.good.calls.length;
    const res = "lift" in step
      ? await lift(gw, { controlBody: opts.controlBody, adminToken: opts.adminToken })
      : await replay(gw, { call: opts.aborted, name: step.replay });
    const body = await res.text();
    results.push({
      step,
      status: res.status,
      body: body.slice(0, 2000),
      shouldRetry: res.headers.get("x-should-retry"),
      errorCode: res.headers.get("x-pulsegate-error-code"),
      requestId: res.headers.get("x-request-id"),
      upstreamCalls: opts.good.calls.length - before,
    });
  }
  return results;
}

function replay(gw: TestGateway, opts: { call: TapRecord; name: ReplayName }): Promise<Response> {
  const { path, body } = replayOf(opts.call, opts.name);
  return fetch(`${gw.url}${path}`, {
    method: opts.call.method,
    headers: opts.call.requestHeaders,
    body,
  });
}

function lift(
  gw: TestGateway,
  opts: { controlBody: string; adminToken: string },
): Promise<Response> {
  const fence = abortFence(opts.controlBody);
  // Said by the assertions (the abort's fence), once the run has been printed.
  if (!fence) return Promise.resolve(new Response("the abort named no fence", { status: 599 }));
  return fetch(`${gw.url}/admin/api/fences/${encodeURIComponent(fence.id)}`, {
    method: "DELETE",
    headers: { authorization: `Bearer ${opts.adminToken}` },
  });
}

/** The fence the abort's answer names, or null. */
export function abortFence(controlBody: string): AbortResult["fence"] {
  try {
    return (JSON.parse(controlBody) as AbortResult).fence ?? null;
  } catch {
    return null;
  }
}

/** Each step got what its row expects; a refusal left its own row, the aborted row stayed. */
export function assertFenceSteps(run: {
  expect: FenceExpect;
  results: StepResult[];
  aborted: TapRecord;
  controlBody: string;
  stopped: RequestRecord;
  rows: RequestRecord[];
}): void {
  const { expect } = run;
  const fence = abortFence(run.controlBody);
  assert.equal(fence?.kind, expect.kind, `the abort's fence: ${run.controlBody}`);
  assert.equal(run.results.length, expect.steps.length, "every step ran");
  const format = formatOf(run.aborted.path);
  let lifted = false;
  for (const result of run.results) {
    const { step } = result;
    if ("lift" in step) {
      assert.equal(result.status, 200, `the lift: ${result.body}`);
      assert.deepEqual(JSON.parse(result.body), { id: fence?.id, lifted: true });
      lifted = true;
      continue;
    }
    const what: string = `the ${step.replay} replay after the ${expect.kind} fence's ` +
      (lifted ? "lift" : "making");
    const row = run.rows.find((r) => r.id === result.requestId);
    assert.ok(row, `${what}: no history row (x-request-id ${result.requestId})`);
    assert.equal(row.sessionId, run.stopped.sessionId, `${what}: in the aborted one's session`);
    assert.equal(row.keyId, run.stopped.keyId);
    if (step.want === "answered") {
      assert.equal(result.status, 200, `${what}: ${result.body}`);
      assert.equal(result.upstreamCalls, 1, `${what} reached the upstream`);
      assert.equal(row.outcome, "success", `${what}: ${row.errorMessage}`);
      assert.ok((row.costUsd ?? 0) > 0, `${what} was billed`);
      continue;
    }
    assert.equal(result.status, FINAL_STATUS[format], `${what}: ${result.body}`);
    assert.equal(result.shouldRetry, "false", `${what}: x-should-retry`);
    assert.equal(result.errorCode, expect.code, `${what}: ${result.body}`);
    assert.match(result.body, new RegExp(expect.code.replaceAll(".", "\\.")));
    assert.equal(result.upstreamCalls, 0, `${what} reached the upstream`);
    assert.equal(row.outcome, "error");
    assert.equal(row.errorCode, expect.code);
    assert.equal(row.failureSource, "aborted");
    assert.match(row.errorMessage ?? "", new RegExp(fence?.id ?? "no fence"), "names its fence");
    assert.equal(row.upstream, null, `${what}: no upstream picked`);
    assert.equal(row.costUsd, null, `${what}: no cost`);
  }
}
