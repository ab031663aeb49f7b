import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client";
// The SDK's wildcard export names no types for a `.js` path: the import says where they are.
// @ts-types="@modelcontextprotocol/sdk/client/streamableHttp"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { eventually, startTestGateway, type TestGateway } from "./harness.ts";
import { startFakeMcp } from "./fake_mcp/sdk_server.ts";
import { startHostileMcp } from "./fake_mcp/hostile_server.ts";

const KEYS = { KEY_ALPHA: "key-alpha", KEY_BETA: "key-beta", TOOL_TOKEN: "server-secret" };
const ADMIN = "admin-secret";

/** A config of the fakes as tool servers; the model route is there because a config needs one. */
function mcpConfig(
  servers: ConfigInput["mcp_servers"],
  opts: { betaServers?: string[] } = {},
): ConfigInput {
  return {
    upstreams: [{ id: "unused", kind: "openai-chat", base_url: "http://127.0.0.1:9/v1" }],
    routes: [{ model: "m", candidates: [{ upstream: "unused", model: "m" }] }],
    keys: [
      { id: "alpha", key_env: "KEY_ALPHA" },
      { id: "beta", key_env: "KEY_BETA", mcp_servers: opts.betaServers ?? [] },
    ],
    mcp_servers: servers,
  };
}

/** The SDK's client through the gateway's /mcp with a gateway key. */
async function connect(gw: TestGateway, key: string): Promise<Client> {
  const client = new Client({ name: "test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${gw.url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  return client;
}

async function withMcp(
  fakes: { close(): Promise<void> }[],
  config: ConfigInput,
  run: (gw: TestGateway) => Promise<void>,
): Promise<void> {
  try {
    await using gw = await startTestGateway(config, {
      env: { ...KEYS, PULSEGATE_ADMIN_TOKEN: ADMIN },
    });
    await run(gw);
  } finally {
    for (const fake of fakes) await fake.close();
  }
}

function textOf(result: unknown): string {
  const content = (result as { content: { text: string }[] }).content;
  return content.map((c) => c.text).join("");
}

/** The ids of the mcp rows written so far. */
async function toolRowIds(gw: TestGateway): Promise<string[]> {
  await gw.writer.flush();
  const rows = await gw.db.client.execute(
    "SELECT id FROM requests WHERE client_format = 'mcp' ORDER BY started_at",
  );
  return rows.rows.map((r) => String(r.id));
}

/** The one mcp row the gateway holds for a call, once written. */
async function onlyToolRow(gw: TestGateway) {
  const ids = await toolRowIds(gw);
  assert.equal(ids.length, 1, "one row per tool call");
  return await gw.row(ids[0]!);
}

Deno.test("mcp: two servers federated, names <server>__<tool>, per-key allow-lists, no client credential upstream, one row per call", async () => {
  const one = startFakeMcp({ name: "one", tools: ["lookup"] });
  const two = startFakeMcp({ name: "two", tools: ["write"] });
  const config = mcpConfig([
    { id: "one", url: one.url, bearer_token_env: "TOOL_TOKEN" },
    { id: "two", url: two.url },
    // Nothing listens there: listed by no one, charged to its cooldown.
    { id: "gone", url: "http://127.0.0.1:9/mcp" },
  ], { betaServers: ["two"] });
  await withMcp([one, two], config, async (gw) => {
    const alpha = await connect(gw, KEYS.KEY_ALPHA);
    const listed = await alpha.listTools();
    assert.deepEqual(listed.tools.map((t) => t.name).sort(), ["one__lookup", "two__write"]);
    const gone = gw.mcp.cooldowns(gw.state.config!.mcp_servers[2]!);
    assert.equal(gone.get("gone#1").consecutiveFailures, 1);
    const read = await alpha.callTool({ name: "one__lookup", arguments: { key: "k1" } });
    assert.equal(textOf(read), 'one:lookup:{"key":"k1"}');
    assert.deepEqual(one.calls, [{ tool: "lookup", args: { key: "k1" } }]);
    // The operator's token reached the server; the caller's gateway key never did.
    assert.ok(one.authorizations.every((a) => a === "Bearer server-secret"));
    assert.ok(two.authorizations.every((a) => a === null));
    const { request, attempts } = await onlyToolRow(gw);
    assert.equal(request.route, "one__lookup");
    assert.equal(request.toolServer, "one");
    assert.equal(request.upstream, "one#1");
    assert.equal(request.upstreamModel, "lookup");
    assert.equal(request.keyId, "alpha");
    assert.equal(request.status, 200);
    assert.ok((request.bytesIn ?? 0) > 0 && (request.bytesOut ?? 0) > 0);
    assert.deepEqual(attempts.map((a) => [a.upstream, a.outcome]), [["one#1", "success"]]);
    await alpha.close();

    const beta = await connect(gw, KEYS.KEY_BETA);
    const betaTools = await beta.listTools();
    assert.deepEqual(betaTools.tools.map((t) => t.name), ["two__write"]);
    // A server the key may not use is answered as a tool that does not exist.
    const refused = await beta.callTool({ name: "one__lookup", arguments: { key: "k2" } })
      .then(() => null, (err: Error & { code?: number }) => err);
    assert.equal(refused?.code, -32602);
    assert.equal(one.calls.length, 1, "the refused call never reached server one");
    await beta.close();
    const metrics = gw.metrics.render();
    assert.match(metrics, /pulsegate_mcp_tool_calls_total\{server="one",outcome="success"\} 1/);
  });
});

/** The JSON-RPC error a call ended with (the SDK client throws an McpError). */
async function rpcFailure(call: Promise<unknown>): Promise<{ code: number; message: string }> {
  const err = await call.then(() => null, (e: Error & { code?: number }) => e);
  assert.ok(err, "the call failed");
  return { code: err.code ?? 0, message: err.message };
}

Deno.test("mcp: a silent replica is timed out and failed over for a read-only tool, and refused truthfully for a mutating one", async () => {
  const silent = startFakeMcp({ name: "silent", tools: ["lookup", "write"] });
  const good = startFakeMcp({ name: "good", tools: ["lookup", "write"] });
  silent.mode = "silent";
  const config = mcpConfig([{
    id: "one",
    url: silent.url,
    replicas: [good.url],
    failover: { idle_timeout_secs: 30 },
  }]);
  await withMcp([silent, good], config, async (gw) => {
    const client = await connect(gw, KEYS.KEY_ALPHA);
    await client.listTools();
    const read = await client.callTool({ name: "one__lookup", arguments: { key: "r" } });
    assert.equal(textOf(read), 'good:lookup:{"key":"r"}');
    assert.deepEqual(silent.calls.map((c) => c.tool), ["lookup"]);
    await eventually(() => silent.cancelled.length === 1, { what: "the lost call cancelled" });
    const [readId] = await toolRowIds(gw);
    const readRow = await gw.row(readId!);
    assert.equal(readRow.request.status, 200);
    assert.deepEqual(readRow.attempts.map((a) => [a.upstream, a.outcome]), [
      ["one#1", "idle_timeout"],
      ["one#2", "success"],
    ]);

    const failure = await rpcFailure(
      client.callTool({ name: "one__write", arguments: { key: "w" } }),
    );
    assert.equal(failure.code, -32010);
    assert.match(failure.message, /may have run/);
    assert.deepEqual(silent.calls.map((c) => c.tool), ["lookup", "write"]);
    assert.deepEqual(good.calls.map((c) => c.tool), ["lookup"], "the write was never sent again");
    await eventually(() => silent.cancelled.length === 2, { what: "the write cancelled" });
    const ids = await toolRowIds(gw);
    const writeRow = await gw.row(ids[1]!);
    assert.equal(writeRow.request.errorCode, "gw.mcp.tool_may_have_run");
    assert.equal(writeRow.request.status, 504);
    assert.deepEqual(writeRow.attempts.map((a) => [a.upstream, a.outcome]), [
      ["one#1", "idle_timeout"],
    ]);
    await client.close();
  });
});

/** The one tool call in progress, once it is. */
async function runningCall(gw: TestGateway): Promise<string> {
  await eventually(() => gw.registry.all().some((l) => l.record.clientFormat === "mcp"));
  return gw.registry.all().find((l) => l.record.clientFormat === "mcp")!.record.id;
}

Deno.test("mcp: an abort by request id and by session stops a running tool call; the server is sent notifications/cancelled", async () => {
  const fake = startFakeMcp({ name: "one", tools: ["wait"] });
  const config = mcpConfig([{ id: "one", url: fake.url }]);
  await withMcp([fake], config, async (gw) => {
    const client = await connect(gw, KEYS.KEY_ALPHA);
    const progress: string[] = [];
    const call = rpcFailure(client.callTool({ name: "one__wait", arguments: {} }, undefined, {
      onprogress: (p) => progress.push(p.message ?? ""),
    }));
    const id = await runningCall(gw);
    await eventually(() => progress.length === 1, { what: "progress relayed" });
    const control = await fetch(`${gw.url}/request/${id}/abort`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    assert.equal(control.status, 200);
    assert.deepEqual((await control.json()).requests, [id]);
    assert.equal((await call).code, -32013);
    await eventually(() => fake.cancelled.length === 1, { what: "cancelled sent" });
    const { request, attempts } = await gw.row(id);
    assert.equal(request.status, 499);
    assert.equal(request.errorCode, "gw.request.aborted");
    assert.deepEqual(attempts.map((a) => a.outcome), ["aborted"]);

    // A session abort stops the tool calls of the session the agent names, as its model turns.
    const agent = new Client({ name: "agent", version: "1.0.0" });
    await agent.connect(
      new StreamableHTTPClientTransport(new URL(`${gw.url}/mcp`), {
        requestInit: {
          headers: { authorization: `Bearer ${KEYS.KEY_ALPHA}`, "x-session-id": "agent-7" },
        },
      }),
    );
    const second = rpcFailure(agent.callTool({ name: "one__wait", arguments: {} }));
    const secondId = await runningCall(gw);
    await eventually(() => fake.calls.length === 2, { what: "the second call reached the server" });
    const stopped = await fetch(`${gw.url}/sessions/agent-7/abort`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEYS.KEY_ALPHA}` },
    });
    assert.equal(stopped.status, 200);
    assert.deepEqual((await stopped.json()).requests, [secondId]);
    assert.equal((await second).code, -32013);
    await eventually(() => fake.cancelled.length === 2, { what: "second cancelled sent" });
    assert.equal((await gw.row(secondId)).request.sessionId, "agent-7");
    await agent.close();
    await client.close();
  });
});

/** A session opened by hand, for a caller the SDK would not let leave mid-call. */
async function rawSession(gw: TestGateway): Promise<Record<string, string>> {
  const headers = {
    authorization: `Bearer ${KEYS.KEY_ALPHA}`,
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
  };
  const init = await fetch(`${gw.url}/mcp`, {
    method: "POST",
    headers,
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "raw", version: "1" },
      },
    }),
  });
  assert.equal(init.status, 200);
  assert.equal((await init.json()).result.protocolVersion, "2025-06-18");
  return {
    ...headers,
    "mcp-session-id": init.headers.get("mcp-session-id")!,
    "mcp-protocol-version": "2025-06-18",
  };
}

Deno.test("mcp: a caller leaving mid-call gets one 499 row, no retry, notifications/cancelled sent, the slot freed", async () => {
  const fake = startFakeMcp({ name: "one", tools: ["wait"] });
  const spare = startFakeMcp({ name: "spare", tools: ["wait"] });
  const config = mcpConfig([{ id: "one", url: fake.url, replicas: [spare.url] }]);
  await withMcp([fake, spare], config, async (gw) => {
    const headers = await rawSession(gw);
    const leave = new AbortController();
    const answer = await fetch(`${gw.url}/mcp`, {
      method: "POST",
      headers,
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 2,
        method: "tools/call",
        params: { name: "one__wait", arguments: {} },
      }),
      signal: leave.signal,
    });
    assert.equal(answer.headers.get("content-type"), "text/event-stream");
    const id = answer.headers.get("x-request-id")!;
    await eventually(() => fake.calls.length === 1, { what: "the call reached the server" });
    assert.equal(gw.mcp.inFlight("one#1"), 1);
    leave.abort();
    await answer.body?.cancel().catch(() => {});
    const { request, attempts } = await gw.row(id);
    assert.equal(request.status, 499);
    assert.equal(request.errorCode, "gw.client.disconnected");
    assert.deepEqual(attempts.map((a) => [a.upstream, a.outcome]), [[
      "one#1",
      "client_disconnected",
    ]]);
    await eventually(() => fake.cancelled.length === 1, { what: "cancelled sent" });
    assert.equal(spare.calls.length, 0, "never retried");
    assert.equal(gw.mcp.inFlight("one#1"), 0);
    assert.equal(gw.registry.size, 0);
    assert.equal((await toolRowIds(gw)).length, 1);
  });
});

Deno.test("mcp: a failing replica is paused, refused without a call while paused, probed once half-open, the pause doubled on a failed probe", async () => {
  const fake = startFakeMcp({ name: "one", tools: ["lookup"] });
  fake.mode = "silent";
  const config = mcpConfig([{
    id: "one",
    url: fake.url,
    // 6 s real at the suites' scale: long enough that nothing here waits it out.
    failover: {
      idle_timeout_secs: 30,
      failures_to_pause: 1,
      pause_secs: 600,
      max_pause_secs: 3600,
    },
  }]);
  await withMcp([fake], config, async (gw) => {
    const client = await connect(gw, KEYS.KEY_ALPHA);
    await client.listTools();
    const call = () => client.callTool({ name: "one__lookup", arguments: { key: "c" } });
    assert.equal((await rpcFailure(call())).code, -32011);
    const server = gw.state.config!.mcp_servers[0]!;
    const cooldowns = gw.mcp.cooldowns(server);
    assert.equal(cooldowns.phase("one#1"), "paused");
    assert.match(
      gw.metrics.render(),
      /pulsegate_mcp_replica_state\{replica="one#1",state="paused"\} 1/,
    );
    // The admin's health panel shows the replica like an upstream.
    await gw.writer.flush();
    const health = await fetch(`${gw.url}/admin/api/health`, {
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    const replica = (await health.json()).upstreams.find((u: { id: string }) => u.id === "one#1");
    assert.equal(replica.kind, "mcp");
    assert.equal(replica.state, "paused");
    assert.equal(replica.recent.idleTimeouts, 1);
    assert.equal((await rpcFailure(call())).code, -32012);
    assert.equal(fake.calls.length, 1, "no call while paused");
    // The pause's end, without waiting it out: the state as it stands once its time has passed.
    const endPause = () =>
      cooldowns.load([{ ...cooldowns.get("one#1"), pausedUntil: gw.clock.now() - 1 }]);
    endPause();
    assert.equal(cooldowns.phase("one#1"), "probing");
    assert.equal((await rpcFailure(call())).code, -32011);
    assert.equal(fake.calls.length, 2, "one probe");
    assert.equal(cooldowns.get("one#1").pauseCount, 2, "the pause doubled");
    assert.match(cooldowns.get("one#1").reason ?? "", /probe/);

    endPause();
    fake.mode = "gate";
    const probe = call();
    await eventually(() => fake.calls.length === 3, { what: "the probe reached the server" });
    assert.equal((await rpcFailure(call())).code, -32012, "one probe at a time");
    assert.equal(fake.calls.length, 3);
    fake.open();
    assert.equal(textOf(await probe), 'one:lookup:{"key":"c"}');
    assert.equal(cooldowns.phase("one#1"), "ok");
    assert.equal(textOf(await call()), 'one:lookup:{"key":"c"}');
    assert.equal(gw.metrics.probes.get({ upstream: "one#1", result: "ok" }), 1);
    await client.close();
  });
});

Deno.test("mcp: hostile frames both ways are cut and recorded, never the process", async () => {
  const hostile = startHostileMcp();
  const fake = startFakeMcp({ name: "good", tools: ["lookup"] });
  const config = mcpConfig([
    {
      id: "bad",
      url: hostile.url,
      max_result_bytes: 4096,
      max_notifications: 50,
      // Four bad answers in a row: not paused before the last one (cooldown is tested above).
      failover: { failures_to_pause: 10 },
    },
    { id: "good", url: fake.url },
  ]);
  await withMcp([hostile, fake], config, async (gw) => {
    const client = await connect(gw, KEYS.KEY_ALPHA);
    const names = (await client.listTools()).tools.map((t) => t.name).sort();
    assert.deepEqual(names, [
      "bad__deep",
      "bad__flood",
      "bad__garbage",
      "bad__huge",
      "good__lookup",
    ]);
    const expected: [string, string][] = [
      ["garbage", "gw.mcp.malformed"],
      ["flood", "gw.mcp.flood"],
      ["huge", "gw.mcp.oversized"],
      ["deep", "gw.mcp.malformed"],
    ];
    for (const [tool] of expected) {
      const failure = await rpcFailure(client.callTool({ name: `bad__${tool}`, arguments: {} }));
      assert.equal(failure.code, -32015, `${tool}: ${failure.code} ${failure.message}`);
    }
    const rows = await Promise.all((await toolRowIds(gw)).map((id) => gw.row(id)));
    assert.deepEqual(
      rows.map((r) => [r.request.upstreamModel, r.request.errorCode]),
      expected,
    );
    assert.equal(gw.metrics.mcpServerCut.get({ server: "bad", reason: "flood" }), 1);
    assert.equal(gw.metrics.mcpServerCut.get({ server: "bad", reason: "malformed" }), 2);
    assert.equal(gw.metrics.mcpServerCut.get({ server: "bad", reason: "oversized" }), 1);
    // The gateway goes on serving, the good server's tools included.
    const ok = await client.callTool({ name: "good__lookup", arguments: { key: "k" } });
    assert.equal(textOf(ok), 'good:lookup:{"key":"k"}');
    await client.close();

    // A client's bad frames: each answered 4xx with a JSON-RPC error, no tool call made.
    const headers = await rawSession(gw);
    const post = (body: string) => fetch(`${gw.url}/mcp`, { method: "POST", headers, body });
    const bad: [string, number, number][] = [
      ["{not json", 400, -32700],
      [JSON.stringify([{ jsonrpc: "2.0", id: 1, method: "ping" }]), 400, -32600],
      [JSON.stringify({ jsonrpc: "1.0", id: 1, method: "ping" }), 400, -32600],
      [
        `{"jsonrpc":"2.0","id":1,"method":"ping","params":${"[".repeat(300)}${"]".repeat(300)}}`,
        400,
        -32700,
      ],
    ];
    for (const [body, status, code] of bad) {
      const res = await post(body);
      assert.equal(res.status, status, body.slice(0, 40));
      assert.equal((await res.json()).error.code, code, body.slice(0, 40));
    }
    // A web page's requests: a "simple" one (text/plain) and one from another site's Origin.
    const plain = await fetch(`${gw.url}/mcp`, {
      method: "POST",
      headers: { ...headers, "content-type": "text/plain" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
    });
    assert.equal(plain.status, 415);
    await plain.body?.cancel();
    const crossSite = await fetch(`${gw.url}/mcp`, {
      method: "POST",
      headers: { ...headers, origin: "https://evil.example" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
    });
    assert.equal(crossSite.status, 403);
    await crossSite.body?.cancel();
    const pinged = await post(JSON.stringify({ jsonrpc: "2.0", id: 9, method: "ping" }));
    assert.deepEqual(await pinged.json(), { jsonrpc: "2.0", id: 9, result: {} });
    assert.equal((await toolRowIds(gw)).length, 5);
  });
});

Deno.test("mcp: a client's notifications/cancelled and its DELETE stop its calls; DELETE ends its server sessions; unknown sessions are 404, GET 405, versions negotiated", async () => {
  const fake = startFakeMcp({ name: "one", tools: ["wait"] });
  const config = mcpConfig([{ id: "one", url: fake.url }]);
  await withMcp([fake], config, async (gw) => {
    const headers = await rawSession(gw);
    const post = (body: unknown, extra: Record<string, string> = {}) =>
      fetch(`${gw.url}/mcp`, {
        method: "POST",
        headers: { ...headers, ...extra },
        body: JSON.stringify(body),
      });
    const wait = (id: number) => ({
      jsonrpc: "2.0",
      id,
      method: "tools/call",
      params: { name: "one__wait", arguments: {} },
    });
    // The client cancels its own call: the server is told, the caller gets the call's error.
    const first = await post(wait(5));
    await eventually(() => fake.calls.length === 1, { what: "first call running" });
    const cancel = await post({
      jsonrpc: "2.0",
      method: "notifications/cancelled",
      params: { requestId: 5, reason: "user pressed escape" },
    });
    assert.equal(cancel.status, 202);
    assert.match(await first.text(), /"code":-32013/);
    await eventually(() => fake.cancelled.length === 1, { what: "cancel passed on" });
    const firstRow = await gw.row(first.headers.get("x-request-id")!);
    assert.equal(firstRow.request.errorCode, "gw.mcp.cancelled");
    assert.equal(firstRow.request.status, 499);

    // DELETE ends the session: its running call stops, its server session is deleted.
    const second = await post(wait(6));
    await eventually(() => fake.calls.length === 2, { what: "second call running" });
    const ended = await fetch(`${gw.url}/mcp`, { method: "DELETE", headers });
    assert.equal(ended.status, 200);
    assert.match(await second.text(), /"code":-32013/);
    await eventually(() => fake.cancelled.length === 2 && fake.deleted === 1, {
      what: "cancelled and DELETE passed on",
    });
    assert.equal(gw.mcp.sessions.size, 0);
    const after = await post({ jsonrpc: "2.0", id: 7, method: "ping" });
    assert.equal(after.status, 404);
    assert.equal((await after.json()).error.data.code, "gw.mcp.unknown_session");

    // Another key cannot use a session it did not open.
    const theirs = await rawSession(gw);
    const stolen = await post({ jsonrpc: "2.0", id: 8, method: "ping" }, {
      "mcp-session-id": theirs["mcp-session-id"]!,
      authorization: `Bearer ${KEYS.KEY_BETA}`,
    });
    assert.equal(stolen.status, 404);
    const get = await fetch(`${gw.url}/mcp`, { headers: theirs });
    assert.equal(get.status, 405);
    await get.body?.cancel();
    const unknownVersion = await fetch(`${gw.url}/mcp`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEYS.KEY_ALPHA}`, "content-type": "application/json" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: {
          protocolVersion: "1999-01-01",
          capabilities: {},
          clientInfo: { name: "x", version: "1" },
        },
      }),
    });
    assert.equal((await unknownVersion.json()).result.protocolVersion, "2025-11-25");
    const noKey = await fetch(`${gw.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
    });
    assert.equal(noKey.status, 401);
    await noKey.body?.cancel();
  });
});

Deno.test("mcp: a tool call takes its key's max_in_flight place; the loop breaker stops the same call repeated in a session", async () => {
  const fake = startFakeMcp({ name: "one", tools: ["lookup", "wait"] });
  const config: ConfigInput = {
    ...mcpConfig([{ id: "one", url: fake.url }]),
    keys: [{
      id: "alpha",
      key_env: "KEY_ALPHA",
      max_in_flight: 1,
      loop_breaker: { repeats: 3, window_secs: 3600 },
    }],
  };
  await withMcp([fake], config, async (gw) => {
    const client = await connect(gw, KEYS.KEY_ALPHA);
    const running = rpcFailure(client.callTool({ name: "one__wait", arguments: {} }));
    const id = await runningCall(gw);
    await eventually(() => fake.calls.length === 1, { what: "the call reached the server" });
    const busy = await rpcFailure(
      client.callTool({ name: "one__lookup", arguments: { key: "a" } }),
    );
    assert.equal(busy.code, -32014);
    assert.match(busy.message, /max_in_flight/);
    assert.equal(fake.calls.length, 1);
    await fetch(`${gw.url}/request/${id}/abort`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}` },
    }).then((r) => r.body?.cancel());
    await running;
    await eventually(() => gw.registry.size === 0);
    const same = () => client.callTool({ name: "one__lookup", arguments: { key: "same" } });
    await same();
    await same();
    const looped = await rpcFailure(same());
    assert.equal(looped.code, -32014);
    assert.match(looped.message, /same request body|repeat|loop/i);
    assert.equal(fake.calls.filter((c) => c.tool === "lookup").length, 2);
    const rows = await Promise.all((await toolRowIds(gw)).map((rowId) => gw.row(rowId)));
    assert.deepEqual(rows.map((r) => r.request.errorCode), [
      "gw.request.aborted",
      "gw.key.max_in_flight",
      null,
      null,
      "gw.session.loop_detected",
    ]);
    await client.close();
  });
});

Deno.test("mcp: a priced tool bills its answered call on the row, the cost metric, the key's budget and the session's", async () => {
  const fake = startFakeMcp({ name: "one", tools: ["lookup"] });
  const config: ConfigInput = {
    ...mcpConfig([{ id: "one", url: fake.url, prices: { lookup: 0.25 } }]),
    keys: [
      { id: "alpha", key_env: "KEY_ALPHA", budget: { usd: 0.5, period: "day" } },
      { id: "beta", key_env: "KEY_BETA", session_budget: { usd: 0.5 } },
    ],
  };
  await withMcp([fake], config, async (gw) => {
    const client = await connect(gw, KEYS.KEY_ALPHA);
    await client.callTool({ name: "one__lookup", arguments: { key: "a" } });
    await client.callTool({ name: "one__lookup", arguments: { key: "b" } });
    // The budget is spent: the third call is refused before it reaches the server.
    await eventually(async () => {
      const failure = await client.callTool({ name: "one__lookup", arguments: { key: "c" } })
        .then(() => null, (err: Error & { code?: number }) => err.code);
      return failure === -32014;
    }, { what: "the key's budget refuses" });
    assert.equal(fake.calls.length, 2);
    const rows = await Promise.all((await toolRowIds(gw)).map((id) => gw.row(id)));
    assert.deepEqual(rows.slice(0, 2).map((r) => r.request.costUsd), [0.25, 0.25]);
    assert.equal(rows[2]!.request.errorCode, "gw.key.budget_exhausted");
    assert.equal(gw.metrics.cost.get({ route: "mcp:one", upstream: "one#1" }), 0.5);
    await client.close();

    // A session's budget counts its tool calls' cost too.
    const beta = await connect(gw, KEYS.KEY_BETA);
    await beta.callTool({ name: "one__lookup", arguments: { key: "d" } });
    await beta.callTool({ name: "one__lookup", arguments: { key: "e" } });
    const spent = await rpcFailure(beta.callTool({ name: "one__lookup", arguments: { key: "f" } }));
    assert.equal(spent.code, -32014);
    assert.equal(fake.calls.length, 4);
    const last = await gw.row((await toolRowIds(gw)).at(-1)!);
    assert.equal(last.request.errorCode, "gw.session.budget_exhausted");
    await beta.close();
  });
});
