/**
 * docs/observability.md "Where the cache is carried": Anthropic's cache marks and thinking kept
 * through the IR, to Claude on Bedrock and on a resumed hop; thinking signatures kept in a
 * translated stream. The resumed hop on a whole gateway in virtual time (tests/virtual_gateway.ts).
 */
import assert from "node:assert/strict";
import { parseAnthropicRequest } from "../../gateway/formats/anthropic/request.ts";
import { anthropicRequestBody } from "../../gateway/formats/anthropic/request.ts";
import { anthropicClient } from "../../gateway/formats/anthropic/mod.ts";
import { converseRequestBody } from "../../gateway/formats/bedrock/request.ts";
import { isRecord } from "../../gateway/runtime/json.ts";
import { startVirtualGateway } from "../virtual_gateway.ts";
import { RESUME_ENV, RESUME_SCRIPTS, upstreamEntry } from "../fake_upstreams/resume_scripts.ts";

const EPHEMERAL = { type: "ephemeral" };
const HOUR = { type: "ephemeral", ttl: "1h" };

/** Claude Code's shape: cached tools, a cached system prompt, the newest turn marked. */
const agentBody = {
  model: "smart",
  max_tokens: 2000,
  stream: true,
  thinking: { type: "enabled", budget_tokens: 1024 },
  tools: [
    { name: "Read", description: "Read a file", input_schema: { type: "object" } },
    {
      name: "Bash",
      description: "Run a command",
      input_schema: { type: "object" },
      cache_control: HOUR,
    },
  ],
  system: [
    { type: "text", text: "You are Claude Code." },
    { type: "text", text: "Long instructions.", cache_control: HOUR },
  ],
  messages: [
    { role: "user", content: "Fix the bug." },
    {
      role: "assistant",
      content: [
        { type: "thinking", thinking: "Look first.", signature: "sig-1" },
        { type: "tool_use", id: "toolu_1", name: "Read", input: { path: "a.ts" } },
      ],
    },
    {
      role: "user",
      content: [
        { type: "tool_result", tool_use_id: "toolu_1", content: "code", cache_control: EPHEMERAL },
      ],
    },
  ],
};

Deno.test("anthropic → IR → anthropic: every cache mark and the thinking come back", () => {
  const body = anthropicRequestBody(parseAnthropicRequest(agentBody), "claude-sonnet-4-5");
  assert.deepEqual(body.system, agentBody.system);
  assert.deepEqual(body.tools, agentBody.tools);
  assert.deepEqual(body.thinking, agentBody.thinking);
  assert.deepEqual(
    body.messages,
    agentBody.messages.slice(0, 2).concat([{
      role: "user",
      content: [{
        type: "tool_result",
        tool_use_id: "toolu_1",
        content: "code",
        cache_control: EPHEMERAL,
      }],
    }]).map((m) =>
      typeof m.content === "string" ? { ...m, content: [{ type: "text", text: m.content }] } : m
    ),
  );
});

Deno.test("anthropic → bedrock Claude: cache points where the marks were, thinking as Claude's", () => {
  const ir = parseAnthropicRequest({ ...agentBody, cache_control: EPHEMERAL });
  const body = converseRequestBody(ir, "anthropic.claude-sonnet-4-5-20250929-v1:0");
  assert.deepEqual(body.system, [
    { text: "You are Claude Code." },
    { text: "Long instructions." },
    { cachePoint: { type: "default", ttl: "1h" } },
  ]);
  const tools = (body.toolConfig as { tools: unknown[] }).tools;
  assert.deepEqual(tools.slice(1), [
    {
      toolSpec: {
        name: "Bash",
        description: "Run a command",
        inputSchema: { json: { type: "object" } },
      },
    },
    { cachePoint: { type: "default", ttl: "1h" } },
  ]);
  const messages = body.messages as { role: string; content: Record<string, unknown>[] }[];
  assert.deepEqual(messages[1]!.content[0], {
    reasoningContent: { reasoningText: { text: "Look first.", signature: "sig-1" } },
  });
  assert.deepEqual(messages[2]!.content, [
    { toolResult: { toolUseId: "toolu_1", content: [{ text: "code" }] } },
    { cachePoint: { type: "default" } },
  ], "the block's mark, and the request's own mark on the same last block, make one point");
  assert.deepEqual(body.additionalModelRequestFields, {
    thinking: { type: "enabled", budget_tokens: 1024 },
  });
  // A model that takes no cache points (or no thinking) is sent neither.
  const llama = converseRequestBody(ir, "meta.llama3-70b-instruct-v1:0");
  assert.ok(!JSON.stringify(llama).includes("cachePoint"));
  assert.equal(llama.additionalModelRequestFields, undefined);
});

Deno.test("a translated stream keeps the thinking signature for an Anthropic client", () => {
  const encoder = anthropicClient.streamEncoder({ id: "m1", model: "smart" });
  const out = [
    encoder.encode({ type: "start", id: "m1", model: "smart" }),
    encoder.encode({ type: "reasoning", text: "Hmm." }),
    encoder.encode({ type: "reasoning", text: "", signature: "sig-2" }),
    encoder.encode({ type: "text", text: "Done." }),
    encoder.close(),
  ].map((b) => b ? new TextDecoder().decode(b) : "").join("");
  const deltas = out.split("\n").filter((l) => l.startsWith("data: "))
    .map((l) => JSON.parse(l.slice(6))).filter((e) => e.type === "content_block_delta");
  assert.deepEqual(deltas.map((d) => [d.index, d.delta]), [
    [0, { type: "thinking_delta", thinking: "Hmm." }],
    [0, { type: "signature_delta", signature: "sig-2" }],
    [1, { type: "text_delta", text: "Done." }],
  ]);
});

Deno.test("a resumed Anthropic hop still carries cache_control and thinking", async () => {
  const scripts = RESUME_SCRIPTS.anthropic;
  await using v = await startVirtualGateway({
    upstreams: 2,
    env: RESUME_ENV,
    config: (urls) => ({
      upstreams: urls.map((url, i) => upstreamEntry("anthropic", { id: `up${i + 1}`, url })),
      routes: [{
        model: "smart",
        resume_after_content: "prefill",
        candidates: urls.map((_, i) => ({
          upstream: `up${i + 1}`,
          model: "claude-sonnet-4-5",
          accepts_prefill: true,
        })),
      }],
    }),
  });
  const [first, second] = v.ups;
  first!.enqueue(scripts.first("reset"));
  second!.enqueue(scripts.second());
  const res = await v.send("/v1/messages", agentBody);
  assert.equal(res.status, 200);
  assert.equal(res.endedAt, 0, "resumed at once");
  const said = res.text.split("\n").filter((l) => l.startsWith("data: "))
    .map((l) => JSON.parse(l.slice(6))).filter((e) => e.delta?.type === "text_delta")
    .map((e) => e.delta.text).join("");
  assert.equal(said, "Hello, world!", "the continuation reached the client");
  const sent = second!.calls[0]!.json;
  assert.ok(isRecord(sent));
  assert.deepEqual(sent.system, agentBody.system);
  assert.deepEqual(sent.tools, agentBody.tools);
  assert.deepEqual(sent.thinking, agentBody.thinking);
  const messages = sent.messages as { role: string; content: Record<string, unknown>[] }[];
  assert.deepEqual(messages[2]!.content[0]!.cache_control, EPHEMERAL);
  assert.equal(scripts.lastTurn(second!.calls[0]!).text, "Hello, wor", "the prefill");
  const { attempts } = await v.row(res.headers.get("x-request-id")!);
  assert.deepEqual(attempts.map((a) => a.outcome), ["error", "resumed"]);
});
