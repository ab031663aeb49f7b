/**
 * The MCP rows of the fault table (tests/fault_matrix/mcp_faults.ts): each fault of a tool
 * server's first replica × a read-only and a mutating tool, through the SDK client, against a
 * healthy second replica built with the SDK. Each cell's expectation is derived from the row's
 * effect by the one rule of docs/mcp.md, and checked on what the caller got, which replica was
 * called, and the call's row and hops.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client";
// The SDK's wildcard export names no types for a `.js` path: the import says where they are.
// @ts-types="@modelcontextprotocol/sdk/client/streamableHttp"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { startTestGateway } from "./harness.ts";
import { startFakeMcp } from "./fake_mcp/sdk_server.ts";
import { startFaultyMcp } from "./fake_mcp/faulty_server.ts";
import { expectedFor, MCP_FAULTS, MCP_TOOLS } from "./fault_matrix/mcp_faults.ts";

for (const fault of MCP_FAULTS) {
  Deno.test(`mcp fault table: ${fault.name} (${fault.effect})`, async () => {
    const faulty = startFaultyMcp();
    if (fault.serve !== "refused") faulty.fault = fault.serve;
    const spare = startFakeMcp({ name: "spare", tools: ["lookup", "write"] });
    try {
      await using gw = await startTestGateway({
        upstreams: [{ id: "unused", kind: "openai-chat", base_url: "http://127.0.0.1:9/v1" }],
        routes: [{ model: "m", candidates: [{ upstream: "unused", model: "m" }] }],
        mcp_servers: [{
          id: "s",
          // Nothing listens on port 9: the refused row's first replica.
          url: fault.serve === "refused" ? "http://127.0.0.1:9/mcp" : faulty.url,
          replicas: [spare.url],
          max_notifications: 20,
          max_result_bytes: 4096,
          failover: { idle_timeout_secs: 30, failures_to_pause: 100 },
        }],
        // 3 s of silence for the silent row: the healthy replica's answers never come near it.
      }, { scale: 0.1 });
      for (const { tool, repeatable } of MCP_TOOLS) {
        const cell = `${fault.name} × ${tool}`;
        const expected = expectedFor(fault, repeatable);
        const client = new Client({ name: "fault-table", version: "1.0.0" });
        await client.connect(new StreamableHTTPClientTransport(new URL(`${gw.url}/mcp`)));
        await client.listTools();
        const spareBefore = spare.calls.length;
        const outcome = await client.callTool({ name: `s__${tool}`, arguments: { key: "k" } })
          .then(
            (result) => ({ result, code: null as number | null }),
            (err: Error & { code?: number }) => ({ result: null, code: err.code ?? 0 }),
          );
        const text = (outcome.result?.content as { text: string }[] | undefined)
          ?.map((c) => c.text).join("");
        if (expected.answeredBy === "spare") {
          assert.equal(text, `spare:${tool}:{"key":"k"}`, cell);
        } else if (expected.answeredBy === "faulty") {
          if (fault.serve === "rpc_error") assert.equal(outcome.code, -32602, cell);
          else if (fault.serve === "tool_error") {
            assert.equal(outcome.result?.isError, true, cell);
            assert.equal(text, "no such key", cell);
          } else assert.equal(text, `faulty:${tool}`, cell);
        } else {
          assert.equal(outcome.code, expected.rpcCode, cell);
        }
        assert.equal(
          spare.calls.length - spareBefore,
          expected.answeredBy === "spare" ? 1 : 0,
          `${cell}: calls to the spare`,
        );
        await gw.writer.flush();
        const rows = await gw.db.client.execute({
          sql: "SELECT id FROM requests WHERE client_format = 'mcp' AND route = ?",
          args: [`s__${tool}`],
        });
        assert.equal(rows.rows.length, 1, `${cell}: one row`);
        const { request, attempts } = await gw.row(String(rows.rows[0]!.id));
        assert.equal(request.errorCode, expected.rowCode, cell);
        assert.deepEqual(
          attempts.map((a) => [a.upstream, a.outcome]),
          expected.attempts,
          `${cell}: hops`,
        );
        if (fault.code) assert.equal(attempts[0]!.errorCode, fault.code, `${cell}: hop code`);
        await client.close();
      }
    } finally {
      await faulty.close();
      await spare.close();
    }
  });
}
