/**
 * Each client format read through its official SDK, reduced to what a
 * mid-stream resume must keep coherent: the text, how many times the answer
 * started and ended, the block indexes used, and the final usage.
 */
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import OpenAI from "openai";

export type ClientFormat = "anthropic" | "openai-chat" | "openai-responses" | "gemini";

export interface ClientRead {
  text: string;
  /** Message starts seen (Anthropic message_start, Responses response.created, Chat role chunks). */
  starts: number;
  /** Terminal events seen (message_stop, response.completed, finish reasons). */
  ends: number;
  /** Content indexes the stream used (Anthropic block index, Responses output/content index). */
  indexes: string[];
  usage: { input?: number; output?: number };
  /** The error the SDK raised, if the stream ended with one. */
  error?: string;
}

const PROMPT = "Say hello to the world";

export type ClientRun = (
  url: string,
  /**
   * `fetch`: the SDK's own, in place of the network (a gateway in virtual time); `model`: the
   * route asked for ("smart" unless said).
   */
  opts: { requestId: string; fetch?: typeof fetch; model?: string },
) => Promise<ClientRead>;

function failed(read: ClientRead, err: unknown): ClientRead {
  return { ...read, error: err instanceof Error ? err.message : String(err) };
}

const anthropicClient: ClientRun = async (url, { requestId, fetch, model = "smart" }) => {
  const client = new Anthropic({
    apiKey: "unused",
    baseURL: url,
    maxRetries: 0,
    defaultHeaders: { "x-request-id": requestId },
    fetch,
  });
  const read: ClientRead = { text: "", starts: 0, ends: 0, indexes: [], usage: {} };
  try {
    const stream = client.messages.stream({
      model,
      max_tokens: 100,
      messages: [{ role: "user", content: PROMPT }],
    });
    for await (const event of stream) {
      if (event.type === "message_start") read.starts++;
      if (event.type === "message_stop") read.ends++;
      if ("index" in event) read.indexes.push(String(event.index));
    }
    const msg = await stream.finalMessage();
    read.text = msg.content.map((b) => (b.type === "text" ? b.text : "")).join("");
    read.usage = { input: msg.usage.input_tokens, output: msg.usage.output_tokens };
    return read;
  } catch (err) {
    return failed(read, err);
  }
};

function openai(url: string, opts: { requestId: string; fetch?: typeof fetch }): OpenAI {
  return new OpenAI({
    baseURL: `${url}/v1`,
    apiKey: "unused",
    maxRetries: 0,
    defaultHeaders: { "x-request-id": opts.requestId },
    fetch: opts.fetch,
  });
}

const chatClient: ClientRun = async (url, opts) => {
  const read: ClientRead = { text: "", starts: 0, ends: 0, indexes: [], usage: {} };
  try {
    const stream = openai(url, opts).chat.completions.stream({
      model: opts.model ?? "smart",
      messages: [{ role: "user", content: PROMPT }],
      stream_options: { include_usage: true },
    });
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (choice?.delta.role) read.starts++;
      if (choice?.finish_reason) read.ends++;
      if (choice) read.indexes.push(String(choice.index));
      if (chunk.usage) {
        read.usage = { input: chunk.usage.prompt_tokens, output: chunk.usage.completion_tokens };
      }
    }
    const done = await stream.finalChatCompletion();
    read.text = done.choices[0]?.message.content ?? "";
    return read;
  } catch (err) {
    return failed(read, err);
  }
};

const responsesClient: ClientRun = async (url, opts) => {
  const read: ClientRead = { text: "", starts: 0, ends: 0, indexes: [], usage: {} };
  try {
    const stream = openai(url, opts).responses.stream({
      model: opts.model ?? "smart",
      input: PROMPT,
    });
    for await (const event of stream) {
      if (event.type === "response.created") read.starts++;
      if (event.type === "response.completed") read.ends++;
      if (event.type === "response.output_text.delta") {
        read.indexes.push(`${event.output_index}/${event.content_index}`);
      }
    }
    const res = await stream.finalResponse();
    read.text = res.output_text;
    read.usage = { input: res.usage?.input_tokens, output: res.usage?.output_tokens };
    return read;
  } catch (err) {
    return failed(read, err);
  }
};

const geminiClient: ClientRun = async (url, { requestId, fetch, model = "smart" }) => {
  const ai = new GoogleGenAI({
    apiKey: "unused",
    httpOptions: {
      baseUrl: url,
      apiVersion: "v1beta",
      headers: { "x-request-id": requestId },
      fetch,
    },
  });
  const read: ClientRead = { text: "", starts: 0, ends: 0, indexes: [], usage: {} };
  try {
    const chunks = await ai.models.generateContentStream({ model, contents: PROMPT });
    for await (const chunk of chunks) {
      const candidate = chunk.candidates?.[0];
      read.text += candidate?.content?.parts?.map((p) => p.text ?? "").join("") ?? "";
      if (candidate?.finishReason) read.ends++;
      read.indexes.push(String(candidate?.index ?? 0));
      if (chunk.usageMetadata) {
        read.usage = {
          input: chunk.usageMetadata.promptTokenCount,
          output: chunk.usageMetadata.candidatesTokenCount,
        };
      }
    }
    // Gemini has no start event: a chunk stream is one answer by construction.
    read.starts = 1;
    return read;
  } catch (err) {
    return failed(read, err);
  }
};

export const CLIENTS: Record<ClientFormat, ClientRun> = {
  anthropic: anthropicClient,
  "openai-chat": chatClient,
  "openai-responses": responsesClient,
  gemini: geminiClient,
};
