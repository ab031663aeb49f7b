/**
 * The page's fences (docs/admin.md "Fences"), in process: what the abort confirmation promises,
 * the result line's fence and its Lift, the Sessions panel's list with a Lift each, and the API
 * answer they read the durations from. tests/admin_fences_browser_test.ts drives them in Chromium.
 */
import assert from "node:assert/strict";
import { renderToString } from "preact-render-to-string";
import type { AbortResult, FencesView, FenceView } from "../admin/api_types.ts";
import type { SessionsView, SessionView } from "../admin/sessions_types.ts";
import { createAborts } from "../admin/client/aborts.ts";
import { type AdminApi, ApiFailure } from "../admin/client/api.ts";
import {
  createFences,
  fenceKeyLabel,
  fencesOfSession,
  fenceWarning,
  formatDuration,
  formatExpiry,
} from "../admin/client/fences_model.ts";
import { AbortPrompt } from "../admin/client/islands/abort_prompt.tsx";
import { FenceList } from "../admin/client/islands/fence_list.tsx";
import { SessionsPanel } from "../admin/client/islands/sessions.tsx";
import { createSessions } from "../admin/client/sessions_model.ts";
import { chatRoute, startTestGateway } from "./harness.ts";

const NOW = Date.parse("2026-03-01T14:22:05Z");

const sessionFence: FenceView = {
  id: "f-session",
  kind: "session",
  keyId: null,
  sessionId: "agent-7",
  requestId: null,
  instanceId: "i1",
  createdAt: NOW,
  expiresAt: NOW + 600_000,
};
const turnFence: FenceView = {
  ...sessionFence,
  id: "f-turn",
  kind: "turn",
  keyId: "a",
  sessionId: "agent-8",
  requestId: "req-8",
  expiresAt: NOW + 120_000,
};

/** The gateway's side as the page sees it: the fences in force, aborts that make them, lifts. */
function fakeGateway(opts: { fenceSecs?: FencesView["fenceSecs"]; liftFails?: boolean } = {}) {
  const held = new Map<string, FenceView>();
  const calls = { fences: 0, lifts: [] as string[] };
  const abort = (fence: FenceView): Promise<AbortResult> => {
    held.set(fence.id, fence);
    return Promise.resolve({
      requests: [fence.requestId ?? "r-1"],
      fence: {
        id: fence.id,
        kind: fence.kind,
        expires_at: new Date(fence.expiresAt).toISOString(),
      },
    });
  };
  const api: Partial<AdminApi> = {
    fences: () => {
      calls.fences++;
      return Promise.resolve({
        at: NOW,
        fenceSecs: opts.fenceSecs ?? { session: 600, turn: 120 },
        fences: [...held.values()],
      });
    },
    liftFence: (id) => {
      calls.lifts.push(id);
      if (opts.liftFails || !held.delete(id)) {
        return Promise.reject(
          new ApiFailure(`no fence '${id}' is in force`, {
            status: 404,
            code: "admin.fence_not_found",
            problems: [],
          }),
        );
      }
      return Promise.resolve({ id, lifted: true });
    },
    abortSession: () => abort(sessionFence),
    abortRequest: () => abort(turnFence),
  };
  const fences = createFences(api as AdminApi, { now: () => NOW });
  const aborts = createAborts(api as AdminApi, { fences });
  return { held, calls, fences, aborts };
}

Deno.test("fence durations read as people say them", () => {
  const cases: [number, string][] = [
    [0, "0 s"],
    [45, "45 s"],
    [90, "1 min 30 s"],
    [120, "2 min"],
    [600, "10 min"],
    [3600, "1 h"],
    [3605, "1 h"],
    [5400, "1 h 30 min"],
    [90_000, "1 d 1 h"],
  ];
  for (const [secs, said] of cases) assert.equal(formatDuration(secs), said, `${secs} s`);
  assert.equal(formatExpiry(NOW + 598_000, { now: NOW }), "in 9 m 58 s");
  assert.equal(formatExpiry(NOW + 7_200_000, { now: NOW }), "in 2 h");
  assert.equal(formatExpiry(NOW, { now: NOW }), "expired");
});

Deno.test("the confirmation says what the fence will refuse and for how long, or that there is none", () => {
  assert.match(
    fenceWarning("session", 600),
    /^Its new requests, under every key, will be refused for 10 min, or until the fence is lifted\.$/,
  );
  assert.match(fenceWarning("turn", 120), /^Its turn will be refused if re-sent for 2 min/);
  assert.match(fenceWarning("session", 0), /^No fence: session fences are off/);
  assert.match(fenceWarning("turn", 0), /^No fence: turn fences are off/);
  assert.equal(fenceWarning("turn", undefined), "", "nothing promised before the list is read");
});

Deno.test("a session row is fenced by its session's fence of its key or of every key, a turn fence of its own key only", () => {
  const row = { keyId: "a", sessionId: "agent-7" };
  assert.deepEqual(fencesOfSession([sessionFence, turnFence], row), [sessionFence]);
  const keyB = { ...sessionFence, id: "f-b", keyId: "b" };
  assert.deepEqual(fencesOfSession([keyB], row), [], "another key's session fence");
  const openTurn = { ...turnFence, keyId: null, sessionId: "agent-7" };
  assert.deepEqual(fencesOfSession([openTurn], row), [], "the open proxy's turn is not key a's");
  assert.equal(fenceKeyLabel(sessionFence), "every key");
  assert.equal(fenceKeyLabel(openTurn), "open");
  assert.equal(fenceKeyLabel(turnFence), "a");
});

Deno.test("confirmation: the durations in force, read again when the Abort button asks", async () => {
  const { aborts, calls } = fakeGateway({ fenceSecs: { session: 600, turn: 0 } });
  aborts.ask("session", "agent-7");
  assert.equal(calls.fences, 1, "asking reads the durations in force");
  assert.doesNotMatch(renderToString(<AbortPrompt aborts={aborts} />), /refused/, "not read yet");
  await aborts.fences.refresh();
  assert.match(
    renderToString(<AbortPrompt aborts={aborts} />),
    /Abort session <code>agent-7<\/code>\? Every running request of the session stops\. Its new requests, under every key, will be refused for 10 min, or until the fence is lifted\./,
  );
  await aborts.fences.refresh();
  aborts.ask("request", "req-8");
  assert.match(renderToString(<AbortPrompt aborts={aborts} />), /No fence: turn fences are off/);
});

Deno.test("result line: the fence and its expiry, Lift lifts it and the list is read again", async () => {
  const { aborts, calls, held } = fakeGateway();
  aborts.ask("session", "agent-7");
  await aborts.confirm();
  const before = calls.fences;
  await aborts.fences.refresh();
  assert.ok(before >= 2, "read again right after the abort");
  let line = renderToString(<AbortPrompt aborts={aborts} />);
  assert.match(line, /^<p class="notice ok" role="status"/);
  assert.match(
    line,
    /Aborted session agent-7: 1 request stopped \(r-1\)<span class="fence-note" data-fence-id="f-session">\. The session is fenced until <time datetime="2026-03-01T14:32:05\.000Z"/,
  );
  assert.match(line, />Lift<\/button>/);

  await aborts.lift();
  assert.deepEqual(calls.lifts, ["f-session"]);
  assert.equal(held.size, 0);
  assert.deepEqual(aborts.fences.view.value?.fences, [], "the list was read after the lift");
  line = renderToString(<AbortPrompt aborts={aborts} />);
  assert.match(line, /Fence lifted: its requests are answered again/);
  assert.doesNotMatch(line, />Lift</);
});

Deno.test("result line: a lift the gateway refuses says why and keeps the Lift", async () => {
  const { aborts } = fakeGateway({ liftFails: true });
  aborts.ask("request", "req-8");
  await aborts.confirm();
  await aborts.lift();
  const line = renderToString(<AbortPrompt aborts={aborts} />);
  assert.match(line, /Its turn is fenced until <time/);
  assert.match(
    line,
    /Could not lift fence f-turn: no fence 'f-turn' is in force \(admin\.fence_not_found\)/,
  );
  assert.match(line, />Lift<\/button>/);
  assert.match(
    renderToString(<FenceList fences={aborts.fences} />),
    /role="alert">Could not lift fence f-turn/,
    "the list says it too, as the page says other API errors",
  );
});

Deno.test("an abort that leaves no fence says so, and one with nothing running says that", async () => {
  const { aborts } = fakeGateway();
  const api: Partial<AdminApi> = {
    abortSession: () => Promise.resolve({ requests: [], fence: null }),
  };
  const bare = createAborts(api as AdminApi, { fences: aborts.fences });
  bare.ask("session", "idle-1");
  await bare.confirm();
  assert.match(
    renderToString(<AbortPrompt aborts={bare} />),
    /Aborted session idle-1: nothing was running<span class="fence-note">\. No fence was left\./,
  );
});

Deno.test("fence list: each fence's kind, key, session, request, expiry counting down, and a Lift", async () => {
  const { fences, held } = fakeGateway();
  held.set(sessionFence.id, sessionFence).set(turnFence.id, turnFence);
  await fences.refresh();
  const list = renderToString(<FenceList fences={fences} />);
  const rows = list.split("<tr data-fence-id=").slice(1);
  assert.equal(rows.length, 2);
  assert.match(rows[0]!, /^"f-session"/);
  assert.match(rows[0]!, /every key/);
  assert.match(rows[0]!, /<code>agent-7<\/code>/);
  assert.match(rows[0]!, /in 10 m 00 s/);
  assert.match(rows[0]!, /aria-label="Lift session fence agent-7"/);
  assert.match(rows[1]!, /<code>req-8<\/code>/);
  assert.match(rows[1]!, /in 2 m 00 s/);
  assert.match(rows[1]!, /aria-label="Lift turn fence of request req-8"/);

  assert.equal(await fences.lift("f-turn"), null);
  assert.deepEqual(fences.view.value?.fences.map((f) => f.id), ["f-session"]);
  await fences.lift("f-session");
  assert.match(renderToString(<FenceList fences={fences} />), /No fence is in force/);
});

Deno.test("sessions panel: a fenced session's row says so, and the fences are listed below", async () => {
  const { aborts, held } = fakeGateway();
  held.set(sessionFence.id, sessionFence);
  await aborts.fences.refresh();
  const row = (sessionId: string): SessionView => ({
    keyId: "a",
    sessionId,
    derived: false,
    routes: ["smart"],
    upstreams: ["up1"],
    requests: 1,
    running: 0,
    firstAt: NOW,
    lastAt: NOW,
    inputTokens: 1,
    outputTokens: 1,
    cachedTokens: 0,
    cacheWriteTokens: 0,
    cacheHitRate: 0,
    costUsd: null,
    moves: 0,
    moveCacheWriteUsd: null,
    errors: 0,
    budgetRefusals: 0,
    loopRefusals: 0,
    budget: null,
  });
  const view: SessionsView = { since: 0, sessions: [row("agent-7"), row("other")] };
  const sessions = createSessions({ sessions: () => Promise.resolve(view) });
  await sessions.refresh();
  const html = renderToString(
    <SessionsPanel sessions={sessions} aborts={aborts} now={() => NOW} />,
  );
  const [fenced, other] = html.split('<tr data-session-id="').slice(1);
  assert.match(fenced!, /class="tag fence">fenced</);
  assert.doesNotMatch(other!.split("</tr>")[0]!, /tag fence/);
  assert.match(html, /<h3 id="fences-title">Fences<\/h3>/);
  assert.match(html, /aria-label="Lift session fence agent-7"/);
});

Deno.test("GET /admin/api/fences answers the durations of the config in force, 0 for a kind that is off", async () => {
  await using gw = await startTestGateway(
    { ...chatRoute(["http://127.0.0.1:9"]), abort: { session_fence_secs: 0, turn_fence_secs: 45 } },
    { env: { PULSEGATE_ADMIN_TOKEN: "t" } },
  );
  const res = await fetch(`${gw.url}/admin/api/fences`, { headers: { authorization: "Bearer t" } });
  assert.equal(res.status, 200);
  const view: FencesView = await res.json();
  assert.deepEqual(view.fenceSecs, { session: 0, turn: 45 });
  assert.deepEqual(view.fences, []);
});
