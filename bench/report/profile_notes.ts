/**
 * What the serving thread's profiles (hot_path.ts) say about a missed target, in words, with the
 * shares that say it.
 */
import type { HotPathProfile } from "../results.ts";
import { fmt, shareOf, shareText } from "./check_parts.ts";

/**
 * History's share of the serving thread's profile: building and queuing rows (db/), and
 * posting them to the worker (structured clone and the message op).
 */
export function historyShare(hot: HotPathProfile): string {
  return shareText(
    hot.byFunction,
    /\(db\/|libsql|^op_host_post_message|^serialize \(ext:core/,
  );
}

/** What the whole-answer profile says is left on that path, with its shares. */
export function cpuAdvice(hot: HotPathProfile | null): string {
  if (!hot) return "";
  const f = hot.byFile;
  const requests = shareOf(f, /23_request/) + shareOf(hot.byFunction, /^buildRequest /);
  const fetchRest = shareOf(f, /deno_fetch|op_fetch/) - shareOf(f, /23_request/);
  return `The whole-answer profile (below): Web Streams ${shareText(f, /06_streams/)} (reader ` +
    `releases, each building an error object, ${shareText(hot.byFunction, /Reader\w*Release/)}); ` +
    `Request objects ${fmt(requests, 1)} %; the rest of fetch ${fmt(fetchRest, 1)} %, which ` +
    `the floor pays too; building, queuing and posting history rows ${historyShare(hot)}; GC ` +
    `${shareText(f, /garbage/)}. Fetch is handed a url and init (each adapter's \`buildPost\`), ` +
    "and the answer is read into a buffer kept from request to request " +
    "(gateway/forward/body_reader.ts); what is left is the stream machinery of the answer's " +
    "body and of Deno.serve, history, and GC.";
}

/** What the streams profile says, and the one known cause left on that path. */
export function streamAdvice(hot: HotPathProfile | null): string {
  const cut =
    "A plain Chat text delta is no longer parsed (gateway/formats/openai_chat/stream.ts " +
    "`quickChat`), one upstream read is one write to the client, and events passed on unchanged " +
    "go out as the bytes they came in (gateway/formats/sse_stream.ts); what is left is the stream " +
    "machinery: the upstream body's reader and the client's stream, which Deno.serve pumps " +
    "chunk by chunk in JavaScript (the floor hands its fetch body to Deno.serve whole).";
  if (!hot) return cut;
  const json = shareOf(hot.byFunction, /^parseJson /) +
    shareOf(hot.byFile, /openai_chat\/(stream|pulse)\.ts/);
  const sse = shareOf(hot.byFile, /sse_stream\.ts|sse_frames\.ts/) -
    shareOf(hot.byFunction, /^parseJson /);
  const streams = shareOf(hot.byFile, /06_streams/);
  const gc = shareOf(hot.byFile, /garbage/);
  return `In the streams profile (below) Web Streams take ${fmt(streams, 1)} % and GC ` +
    `${fmt(gc, 1)} %; splitting SSE ${fmt(sse, 1)} %, parsing and reading each delta's JSON ` +
    `${fmt(json, 1)} %. ${cut}`;
}
