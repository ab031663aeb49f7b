import { GatewayError } from "../../runtime/gateway_error.ts";
import { isRecord, parseJson } from "../../runtime/json.ts";
import { upstreamStatusError } from "../upstream_error.ts";
import { sortStatus } from "../upstream_status.ts";

/** HTTP status of each Bedrock runtime exception, for the ones that arrive inside a stream. */
const statusByException: Record<string, number> = {
  ValidationException: 400,
  AccessDeniedException: 403,
  ResourceNotFoundException: 404,
  ModelTimeoutException: 408,
  ModelErrorException: 424,
  ModelStreamErrorException: 424,
  ThrottlingException: 429,
  ModelNotReadyException: 429,
  InternalServerException: 500,
  ServiceUnavailableException: 503,
};

/** The model itself failed: the upstream's fault, though Bedrock answers it with a 4xx. */
const modelFailures = new Set(["ModelErrorException", "ModelStreamErrorException"]);

/**
 * Reads a Bedrock error answer: `{"message": ...}` with its exception name in
 * the `x-amzn-ErrorType` header (`ThrottlingException:http://...`), which the
 * caller passes when it has the headers.
 */
export function decodeBedrockError(
  status: number,
  body: string,
  opts: { errorType?: string | null } = {},
): GatewayError {
  const parsed = parseJson(body);
  const fields = isRecord(parsed) ? parsed : {};
  const message = stringField(fields, "message") ?? stringField(fields, "Message");
  const type = exceptionName(opts.errorType) ?? exceptionName(stringField(fields, "__type"));
  if (status === 424 || (type !== undefined && modelFailures.has(type))) {
    const detail = message ?? (body.trim().slice(0, 200) || `HTTP ${status}`);
    // Sorted as its status is, but never as the caller's (upstream_status.ts).
    const sort = sortStatus(status);
    return new GatewayError(`upstream model error ${status}: ${detail}`, {
      code: "gw.upstream.error",
      upstreamType: type,
      upstreamKind: "bedrock",
      statusSort: sort === "callers" ? "failed" : sort,
    });
  }
  if (message === undefined) return upstreamStatusError(status, { body, kind: "bedrock" });
  // One shape for the shared classifier, whichever casing and header the exception came in.
  return upstreamStatusError(status, {
    body: JSON.stringify({ message, __type: type }),
    kind: "bedrock",
  });
}

/** An `:message-type: exception` frame: `:exception-type` names the member, e.g. throttlingException. */
export function bedrockStreamException(exceptionType: string, body: string): GatewayError {
  const type = exceptionName(exceptionType) ?? "InternalServerException";
  return decodeBedrockError(statusByException[type] ?? 500, body, { errorType: type });
}

/** `throttlingException` or `ThrottlingException:http://internal...` → `ThrottlingException`. */
function exceptionName(raw: string | null | undefined): string | undefined {
  const name = raw?.split(":")[0]?.split("#").at(-1)?.trim();
  if (!name) return undefined;
  return name[0]?.toUpperCase() + name.slice(1);
}

function stringField(record: Record<string, unknown>, key: string): string | undefined {
  const value = record[key];
  return typeof value === "string" ? value : undefined;
}
