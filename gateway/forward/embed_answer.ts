import type { Hop } from "./hop.ts";
import { readUntilContent } from "./whole_forward.ts";
import {
  answerCap,
  answerNodes,
  type EmbedInput,
  type EmbedUpstream,
} from "../formats/embeddings.ts";
import { VectorJson } from "../formats/vector_json.ts";
import { nextTurn } from "../runtime/loop_turn.ts";
import { workMs } from "../runtime/clock.ts";

/** Characters handed to the answer's reader at a time: well under a millisecond of reading. */
const PIECE_CHARS = 16 * 1024;
/**
 * The serving thread is given back once reading has held it this long (docs/security.md
 * "Embeddings stay bounded"): other requests and `/healthz` wait at most about this.
 */
const TURN_MS = 4;

/**
 * One embeddings call's answer, read as it arrives (docs/providers.md "Embeddings"): no more
 * bytes than any answer to its inputs could take (`answerCap`, at the vector length asked or
 * `length`), its JSON read a piece at a time into float32 vectors (formats/vector_json.ts) and
 * never held as text, the serving thread given back every few milliseconds. A hostile answer
 * (not JSON, a vector over the cap, a bomb of values) ends the read where it shows. Answers the
 * answer's value, or null when the upstream sent nothing but whitespace.
 */
export async function readEmbedAnswer(
  hop: Hop,
  body: ReadableStream<Uint8Array>,
  opts: { upstream: EmbedUpstream; inputs: EmbedInput[]; length: number },
): Promise<unknown> {
  const { upstream } = opts;
  const id = hop.upstream.id;
  const revive = upstream.revive;
  const parser = new VectorJson({
    upstream: id,
    maxNodes: answerNodes(opts.inputs.length),
    revive: revive && ((key, value) => revive(key, value, { upstream: id })),
  });
  let since = workMs();
  await readUntilContent(hop, body, {
    bills: false,
    cap: answerCap(opts.inputs, { length: opts.length }),
    take: async (text) => {
      for (let at = 0; at < text.length; at += PIECE_CHARS) {
        parser.push(
          at === 0 && text.length <= PIECE_CHARS ? text : text.slice(at, at + PIECE_CHARS),
        );
        if (workMs() - since >= TURN_MS) {
          await nextTurn();
          since = workMs();
        }
      }
    },
  });
  return parser.seen ? parser.end() : null;
}
