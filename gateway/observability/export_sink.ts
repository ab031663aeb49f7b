import type { AttemptRecord, RequestRecord } from "../../db/records.ts";
import type { HistorySink } from "../live/live_request.ts";
import type { Exporter } from "./exporter.ts";

/**
 * A history sink that also hands each request, once closed, with its hops, to
 * the exporter. Hops are held only while their request is open.
 */
export function exportingSink(inner: HistorySink, exporter: Exporter): HistorySink {
  const hops = new Map<string, Map<number, AttemptRecord>>();
  return {
    writeAttempt(a: AttemptRecord) {
      inner.writeAttempt(a);
      const list = hops.get(a.requestId) ?? new Map<number, AttemptRecord>();
      list.set(a.hop, a);
      hops.set(a.requestId, list);
    },
    writeRequest(r: RequestRecord, opts?: { expendable?: boolean }) {
      inner.writeRequest(r, opts);
      if (r.state === "open") return;
      // Nothing enabled to send it to (most gateways): no record is built only to be dropped.
      if (!exporter.receiving()) {
        hops.delete(r.id);
        return;
      }
      const attempts = [...(hops.get(r.id)?.values() ?? [])].sort((x, y) => x.hop - y.hop);
      hops.delete(r.id);
      exporter.push({ request: r, attempts });
    },
  };
}
