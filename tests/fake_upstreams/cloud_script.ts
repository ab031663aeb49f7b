/**
 * Fakes of Azure OpenAI and Vertex AI: a call is answered only at the exact URL, with the auth
 * header and body shape the service takes (else a 400 naming what was wrong, so a test fails on
 * it with the reason), and Azure's answers carry what Azure adds to OpenAI's (prompt filter
 * results, content filter errors).
 */
import type { Call, Handler, Script } from "./server.ts";
import { sseSteps } from "./server.ts";
import { chatStreamBlocks, chatWholeBody } from "./openai_chat_script.ts";

export interface Expected {
  /** Path and query, exactly. */
  path: string;
  /** Headers that must have exactly these values. */
  headers?: Record<string, string>;
  /** Headers that must not be sent. */
  absent?: string[];
  /** Body checks: answer what is wrong, or null. */
  body?: (json: Record<string, unknown>) => string | null;
}

/** What is wrong with a call, or null. */
export function problemWith(call: Call, expected: Expected): string | null {
  if (call.method !== "POST") return `method ${call.method}`;
  if (call.path !== expected.path) return `path ${call.path}, expected ${expected.path}`;
  for (const [name, value] of Object.entries(expected.headers ?? {})) {
    if (call.headers.get(name) !== value) return `header ${name}: ${call.headers.get(name)}`;
  }
  for (const name of expected.absent ?? []) {
    if (call.headers.has(name)) return `header ${name} must not be sent`;
  }
  const json = call.json;
  if (typeof json !== "object" || json === null || Array.isArray(json)) return "body is not JSON";
  return expected.body?.(json as Record<string, unknown>) ?? null;
}

/** Answers `answer(call)` when the call is as expected, else 400 with the problem. */
export function checked(expected: (call: Call) => Expected, answer: Handler): Handler {
  return (call) => {
    const problem = problemWith(call, expected(call));
    if (problem === null) return answer(call);
    return {
      status: 400,
      body: [{ send: JSON.stringify({ error: { message: `fake: ${problem}`, code: "fake" } }) }],
    };
  };
}

const filterResults = {
  hate: { filtered: false, severity: "safe" },
  self_harm: { filtered: false, severity: "safe" },
  sexual: { filtered: false, severity: "safe" },
  violence: { filtered: false, severity: "safe" },
};

/**
 * A Chat Completions stream as Azure sends it: first a chunk with no choices and the prompt's
 * filter results (a keep-alive to the gateway), then OpenAI's chunks.
 */
export function azureChatStream(text: string[], opts: { finish?: string } = {}): Script {
  const promptFilter = `data: ${
    JSON.stringify({
      choices: [],
      created: 0,
      id: "",
      model: "",
      object: "",
      prompt_filter_results: [{ prompt_index: 0, content_filter_results: filterResults }],
    })
  }\n\n`;
  let blocks = chatStreamBlocks({
    text,
    usage: { input: 9, output: 4 },
    model: "gpt-4o-2024-11-20",
  });
  if (opts.finish) {
    blocks = blocks.map((b) =>
      b.replace('"finish_reason":"stop"', `"finish_reason":"${opts.finish}"`)
    );
  }
  return {
    headers: { "content-type": "text/event-stream" },
    body: sseSteps([promptFilter, ...blocks]),
  };
}

export function azureChatWhole(text: string): Script {
  return { body: [{ send: chatWholeBody({ text: [text], usage: { input: 9, output: 4 } }) }] };
}

/** Azure's answer when its content filter refuses the prompt. */
export function azureContentFilterError(): Script {
  return {
    status: 400,
    headers: { "content-type": "application/json" },
    body: [{
      send: JSON.stringify({
        error: {
          message: "The response was filtered due to the prompt triggering Azure OpenAI's " +
            "content management policy. Please modify your prompt and retry.",
          type: null,
          param: "prompt",
          code: "content_filter",
          status: 400,
          innererror: {
            code: "ResponsibleAIPolicyViolation",
            content_filter_result: {
              ...filterResults,
              violence: { filtered: true, severity: "high" },
            },
          },
        },
      }),
    }],
  };
}
