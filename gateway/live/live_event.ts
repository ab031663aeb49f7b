import type { AttemptOutcome, AttemptTrace } from "../../db/records.ts";
import type { GatewayError } from "../runtime/gateway_error.ts";
import type { IrRequest, IrUsage } from "../formats/ir.ts";
import type { UsageField } from "../formats/token_counts.ts";

/**
 * What happened to a request, in the order it happened: the hop, the pump, hedging, resume,
 * billing and abort append these, and nothing else changes a request's record. Its row, its
 * hops' rows, its metrics, its trace and the admin's live view are a fold of them, kept as it
 * goes (docs/design.md "The live record"). `hop` numbers a request's hops from 1; `at` is the
 * clock's ms since the request started (a small integer: a timestamp would be a heap number).
 */
export type LiveEvent =
  /** The body was read: the route it names, the session it belongs to. */
  | { type: "parsed"; ir: IrRequest; sessionId: string | null }
  /** The model named a configured route the key may use: the label of its metrics. */
  | { type: "routed"; route: string }
  /** Waiting for an upstream's slot. */
  | { type: "slot_wait" }
  /**
   * A hop to `upstream` took its slot. `holdsUsage`: its usage stays on its own row until its
   * first content (a hedged or replaying hop).
   */
  | {
    type: "hop";
    hop: number;
    upstream: string;
    model: string;
    movedFrom: string | null;
    resumeOffset: number | null;
    holdsUsage: boolean;
    at: number;
  }
  /**
   * The hop's call went out (once per call of an embeddings hop): the client headers it left
   * out, and its span's trace (its span id and where the call went), the hop row's from then.
   */
  | { type: "sent"; hop: number; droppedHeaders: string | null; trace: AttemptTrace | null }
  /**
   * The upstream answered with a status (the hop's first answer sets its headers time). A
   * stream's opening is held from its first 2xx on (docs/design.md "Failover before content").
   */
  | { type: "headers"; hop: number; status: number; at: number }
  /**
   * The hop's first content (a whole answer's first byte) may go to the client: it won its
   * hedge race, if it ran in one, and is the request's upstream.
   */
  | { type: "claimed"; hop: number }
  /** The hop's usage waits for its first content from now on (see `holdsUsage`). */
  | { type: "hold"; hop: number }
  /** The hop's first content: it answers the client, and the usage it held goes to the request. */
  | { type: "first_content"; hop: number; at: number }
  /** The first content went to the client. */
  | { type: "content"; at: number }
  /**
   * A usage report of a hop, already checked (`rejected`: the fields it had out of range), or,
   * without `hop`, the answer's usage a resume merged over its hops. A hop's reports are
   * cumulative, so consecutive reports of one hop are kept as the last (the fold took each).
   */
  | { type: "usage"; hop?: number; usage: IrUsage; rejected?: readonly UsageField[] }
  /** Counts of the hop's upstream refused as out of range, apart from a usage report. */
  | { type: "refused"; hop: number; fields: readonly UsageField[] }
  /**
   * The gateway's estimate of a hop's tokens (usage_ledger.ts): `input` where it reported none,
   * `output` at least; `answered` carries them onto the request's row.
   */
  | { type: "estimated"; hop: number; input?: number; output?: number; answered: boolean }
  /** The hop ended. */
  | { type: "ended"; hop: number; outcome: AttemptOutcome; error?: GatewayError; at: number }
  /**
   * A tool call's own fields (docs/mcp.md "History and metrics"): its server once resolved, the
   * bytes of the client's message, and of what went back once it ended.
   */
  | { type: "tool"; server?: string; bytesIn?: number; bytesOut?: number }
  /** The request was stopped: its client went, an operator or a peer aborted it. */
  | { type: "abort"; reason: unknown; at: number }
  /** How the request ended for its client; the first one stands. */
  | { type: "settled"; status: number; error?: GatewayError; at: number };
