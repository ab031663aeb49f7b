import { bodyReadToEnd } from "../accept/body_bytes.ts";

/**
 * An answer given before the request's body was read to its end (docs/deploy.md "Answers before
 * the body"): a refusal (401, 403, 415, 429), a 413, a 408, an unknown path. HTTP/1.1 frames the
 * next request after this body, so Deno's server keeps reading, and throwing away, what the client
 * still sends before it reads anything else; a client that never sends the rest held its
 * connection (a descriptor, a place under `PULSEGATE_MAX_CONNECTIONS`) for as long as it liked,
 * `shutdown()` and the keep-alive bound included. Such an answer says `connection: close`, and
 * `ClientConnections` closes the connection after it.
 */

/**
 * Whether a request declares a body: a `Content-Length` other than 0, or a `Transfer-Encoding`.
 * Whatever the method: Deno's server reads a GET's declared body too, it only hides it.
 */
export function declaresBody(request: Request): boolean {
  const length = request.headers.get("content-length");
  if (length !== null) return length !== "0";
  return request.headers.has("transfer-encoding");
}

/** Whether answering now leaves body bytes due: declared, and not read to the end. */
export function leavesBodyUnread(request: Request): boolean {
  return declaresBody(request) && !bodyReadToEnd(request);
}

/** The answer, saying `connection: close`: the client must not send another request on it. */
export function closingAnswer(response: Response): Response {
  try {
    response.headers.set("connection", "close");
    return response;
  } catch {
    // Headers that cannot change (a response as fetched): a copy says it.
    const headers = new Headers(response.headers);
    headers.set("connection", "close");
    return new Response(response.body, {
      status: response.status,
      statusText: response.statusText,
      headers,
    });
  }
}
