import type {
  IrBuiltinTool,
  IrClientTool,
  IrClientTools,
  IrNativeFeature,
  IrPart,
  IrTool,
} from "../ir.ts";
import { optionalString, requireArray, requireRecord, requireString } from "../request_fields.ts";
import { isRecord, parseJson } from "../../runtime/json.ts";

/**
 * Responses tools that other formats have no form for, flattened into plain
 * functions: a tool inside a `namespace` group becomes `{namespace}__{name}`
 * (Codex's own flat MCP names), a free-form `custom` tool a function with one
 * string argument `input`, a client-run `tool_search` a function of that
 * name. `clientTools` remembers each so an answer reports the call back as
 * the client declared it (gateway/formats/openai_responses/response.ts `toolCallItem`).
 */
export interface ToolsInto {
  tools: IrTool[];
  clientTools: IrClientTools;
  builtins: IrBuiltinTool[];
  native: IrNativeFeature[];
}

/** OpenAI, Anthropic, Gemini and Bedrock all take function names of this shape. */
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const MAX_TOOL_NAME = 64;

/** The upstream name of `name` inside `namespace` (or of a plain tool). */
export function flatToolName(namespace: string | undefined, name: string): string {
  if (!namespace) return name;
  const joined = `${namespace.replace(/_+$/, "")}__${name}`;
  if (TOOL_NAME.test(joined)) return joined;
  // Too long or odd characters: a readable prefix and a hash keep it unique.
  const hash = fnv1a(joined).toString(36);
  const safe = joined.replace(/[^a-zA-Z0-9_-]/g, "_");
  return `${safe.slice(0, MAX_TOOL_NAME - hash.length - 1)}_${hash}`;
}

function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** Web search tool types, dated or not (`web_search_2025_08_26`, `web_search_preview`). */
const WEB_SEARCH = /^web_search(?:_preview)?(?:_\d{4}_\d{2}_\d{2})?$/;

/**
 * Reads a list of Responses tools (`tools`, `additional_tools`,
 * `tool_search_output`); answers the upstream names of the functions read.
 */
export function readResponsesTools(
  value: unknown,
  opts: { param: string; into: ToolsInto },
): string[] {
  const { param, into } = opts;
  return requireArray(value, param).flatMap((t, i): string[] => {
    const at = `${param}[${i}]`;
    const tool = requireRecord(t, at);
    const type = requireString(tool.type, `${at}.type`);
    if (type === "function" || type === "custom") return [addTool(tool, { at, into })];
    if (type === "namespace") {
      const namespace = requireString(tool.name, `${at}.name`);
      return requireArray(tool.tools, `${at}.tools`).flatMap((inner, j) => {
        const innerAt = `${at}.tools[${j}]`;
        const innerTool = requireRecord(inner, innerAt);
        const innerType = requireString(innerTool.type, `${innerAt}.type`);
        if (innerType === "function" || innerType === "custom") {
          return [addTool(innerTool, { at: innerAt, into, namespace })];
        }
        into.native.push({
          param: `${innerAt}.type`,
          what: `a '${innerType}' tool in a namespace`,
        });
        return [];
      });
    }
    if (type === "tool_search" && tool.execution === "client") {
      return [add(into, {
        name: "tool_search",
        description: optionalString(tool.description, `${at}.description`),
        parameters: isRecord(tool.parameters)
          ? tool.parameters
          : { type: "object", properties: {} },
      }, { name: "tool_search", shape: "tool_search" })];
    }
    if (WEB_SEARCH.test(type)) into.builtins.push({ type: "web_search", param: `${at}.type` });
    // file_search, mcp, code_interpreter, image_generation, server tool_search, ...: run by OpenAI.
    else into.native.push({ param: `${at}.type`, what: `built-in tool '${type}'` });
    return [];
  });
}

function addTool(
  tool: Record<string, unknown>,
  opts: { at: string; into: ToolsInto; namespace?: string },
): string {
  const { at, into, namespace } = opts;
  const name = requireString(tool.name, `${at}.name`);
  const description = optionalString(tool.description, `${at}.description`);
  const flat = flatToolName(namespace, name);
  if (tool.type === "custom") {
    return add(into, {
      name: flat,
      description: customDescription(description, tool.format),
      parameters: {
        type: "object",
        properties: { input: { type: "string", description: "The tool's free-form input." } },
        required: ["input"],
        additionalProperties: false,
      },
    }, { name, shape: "custom", ...(namespace ? { namespace } : {}) });
  }
  const parameters = isRecord(tool.parameters)
    ? tool.parameters
    : { type: "object", properties: {} };
  return add(into, { name: flat, description, parameters }, namespace ? { name, namespace } : null);
}

/** The first declaration of a name wins: the same tools come back in later tool lists. */
function add(into: ToolsInto, tool: IrTool, client: IrClientTool | null): string {
  if (into.tools.some((t) => t.name === tool.name)) return tool.name;
  into.tools.push(tool);
  if (client) into.clientTools[tool.name] = client;
  return tool.name;
}

/**
 * A free-form tool's input follows a grammar (or is any text); the function
 * that stands in for it says which, so the model writes `input` accordingly.
 */
function customDescription(description: string | undefined, format: unknown): string {
  const lines = [description ?? ""];
  if (isRecord(format) && format.type === "grammar" && typeof format.definition === "string") {
    const syntax = typeof format.syntax === "string" ? format.syntax : "grammar";
    lines.push(`The \`input\` argument must match this ${syntax} grammar:\n${format.definition}`);
  } else {
    lines.push("The `input` argument is free-form text.");
  }
  return lines.filter((l) => l !== "").join("\n\n");
}

/** A free-form call's input, from the arguments of the function that stood in for it. */
export function customInput(args: string): string {
  const parsed = parseJson(args);
  return isRecord(parsed) && typeof parsed.input === "string" ? parsed.input : args;
}

/** A tool search's arguments: an object, as Responses carries them. */
export function searchArguments(args: string): unknown {
  const parsed = parseJson(args);
  return isRecord(parsed) ? parsed : {};
}

/** Items of a Responses history that stand for the reshaped tools, as IR parts. */
export function reshapedCall(
  item: Record<string, unknown>,
  param: string,
): Extract<IrPart, { type: "tool_call" }> | null {
  const id = () => requireString(item.call_id, `${param}.call_id`);
  const namespace = optionalString(item.namespace, `${param}.namespace`);
  if (item.type === "function_call") {
    return {
      type: "tool_call",
      id: id(),
      name: flatToolName(namespace, requireString(item.name, `${param}.name`)),
      arguments: optionalString(item.arguments, `${param}.arguments`) ?? "{}",
    };
  }
  if (item.type === "custom_tool_call") {
    return {
      type: "tool_call",
      id: id(),
      name: flatToolName(namespace, requireString(item.name, `${param}.name`)),
      arguments: JSON.stringify({ input: optionalString(item.input, `${param}.input`) ?? "" }),
    };
  }
  if (item.type === "tool_search_call" && item.execution === "client") {
    return {
      type: "tool_call",
      id: id(),
      name: "tool_search",
      arguments: JSON.stringify(isRecord(item.arguments) ? item.arguments : {}),
    };
  }
  return null;
}

/** What a client tool search loaded, as the text of its result: the tools are now callable. */
export function loadedToolsText(names: string[]): string {
  return names.length ? `Loaded tools: ${names.join(", ")}` : "No tools found.";
}
