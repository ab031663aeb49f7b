import assert from "node:assert/strict";
import { validateConfig } from "./validate.ts";
import { routeMembers } from "./route_entries.ts";

/** The liveness options of docs/liveness.md: off unless set, ranges enforced with clear messages. */
const base = (route: Record<string, unknown>, candidate: Record<string, unknown> = {}) => ({
  upstreams: [{ id: "u", kind: "openai-chat" }],
  routes: [{ model: "smart", ...route, candidates: [{ upstream: "u", model: "m", ...candidate }] }],
});

function problems(raw: unknown): string[] {
  const result = validateConfig(raw);
  return result.ok ? [] : result.problems.map((p) => `${p.path}: ${p.message}`);
}

Deno.test("liveness options are off unless set", () => {
  const result = validateConfig(base({}));
  assert.ok(result.ok);
  const route = result.config.routes[0]!;
  assert.equal(route.first_content_timeout_secs, undefined);
  assert.equal(route.on_context_overflow, undefined);
  assert.equal(routeMembers(route)[0]!.context_window, undefined);
  assert.equal(routeMembers(route)[0]!.first_content_timeout_secs, undefined);
});

Deno.test("liveness options take their documented ranges", () => {
  assert.deepEqual(
    problems(base({ first_content_timeout_secs: 15, on_context_overflow: "next" }, {
      first_content_timeout_secs: 3600,
      context_window: 200_000,
    })),
    [],
  );
  assert.deepEqual(problems(base({ first_content_timeout_secs: 0 })), [
    "routes.0.first_content_timeout_secs: must be between 1 and 3600",
  ]);
  assert.deepEqual(problems(base({}, { first_content_timeout_secs: 3601 })), [
    "routes.0.candidates.0.first_content_timeout_secs: must be between 1 and 3600",
  ]);
  assert.deepEqual(problems(base({}, { context_window: 0 })), [
    "routes.0.candidates.0.context_window: must be between 1 and 100000000",
  ]);
  assert.deepEqual(problems(base({ on_context_overflow: "larger" })), [
    'routes.0.on_context_overflow: must be "next"',
  ]);
});
