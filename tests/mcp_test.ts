import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client";
// The SDK's wildcard export names no types for a `.js` path: the import says where they are.
// @ts-types="@modelcontextprotocol/sdk/client/streamableHttp"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { startTestGateway, type TestGateway } from "./harness.ts";
import { type FakeMcp, startFakeMcp } from "./fake_mcp/sdk_server.ts";

const KEYS = { KEY_ALPHA: "key-alpha", KEY_BETA: "key-beta", TOOL_TOKEN: "server-secret" };
const ADMIN = "admin-secret";

/** A config of the fakes as tool servers; the model route is there because a config needs one. */
function mcpConfig(servers: ConfigInput["mcp_servers"]): ConfigInput {
  return {
    upstreams: [{ id: "unused", kind: "openai-chat", base_url: "http://127.0.0.1:9/v1" }],
    routes: [{ model: "m", candidates: [{ upstream: "unused", model: "m" }] }],
    keys: [
      { id: "alpha", key_env: "KEY_ALPHA" },
      { id: "beta", key_env: "KEY_BETA", mcp_servers: ["two"] },
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
  fakes: FakeMcp[],
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
  ]);
  await withMcp([one, two], config, async (gw) => {
    const alpha = await connect(gw, KEYS.KEY_ALPHA);
    const listed = await alpha.listTools();
    assert.deepEqual(listed.tools.map((t) => t.name).sort(), ["one__lookup", "two__write"]);
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
