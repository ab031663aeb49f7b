import type { ClientStreamShape, UpstreamKind } from "../formats/format.ts";
import type { RoutedRequest } from "./route_request.ts";

/**
 * "Pass through", defined once. The request and the answer pass through
 * separately: a same-format upstream is sent the client's own body, while its
 * answer's bytes reach the client unchanged only where the client's shape takes
 * them as they are (Gemini's JSON array takes no SSE) and nothing must rewrite
 * them (a resumable stream's client whose ids come from the upstream).
 */

/**
 * docs/design.md "Client API": an upstream of the client's own format is sent
 * the client's body, unchanged but for the model; any other gets a
 * translation of the IR. A resume's request carries its prefill in the IR,
 * so it is always translated; a replay's is the original request, sent as the first hop's was.
 */
export function passesBodyThrough(
  req: Pick<RoutedRequest, "codec" | "resumeAt" | "replay">,
  kind: UpstreamKind,
): boolean {
  return (req.resumeAt === undefined || req.replay === true) && req.codec.format === kind;
}

/** Whether a whole answer from `kind` goes to the client as the upstream wrote it. */
export function wholePassesThrough(
  req: Pick<RoutedRequest, "codec">,
  kind: UpstreamKind,
): boolean {
  return req.codec.format === kind;
}

/** Whether a streamed answer's bytes from `kind` go to the client as they came. */
export function streamPassesThrough(
  kind: UpstreamKind,
  /** `resume`: mid-stream resume's say (gateway/forward/stream_resume.ts). */
  opts: { shape: ClientStreamShape; resume: { passesThrough(sameFormat: boolean): boolean } },
): boolean {
  return opts.resume.passesThrough(opts.shape.passthroughFrom === kind);
}
