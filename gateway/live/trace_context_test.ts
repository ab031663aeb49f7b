import assert from "node:assert/strict";
import { formatTraceparent, incomingTrace, newSpanId, parseTraceparent } from "./trace_context.ts";

Deno.test("new trace and span ids are lowercase hex of their lengths, distinct, never all zeros", () => {
  const seen = new Set<string>();
  // Several times the 8 KiB of digits drawn at once, so ids span refills.
  for (let i = 0; i < 2_000; i++) {
    const trace = incomingTrace(new Headers(), { recording: true });
    assert.match(trace.traceId, /^[0-9a-f]{32}$/);
    assert.match(trace.spanId, /^[0-9a-f]{16}$/);
    const span = newSpanId();
    assert.match(span, /^[0-9a-f]{16}$/);
    for (const id of [trace.traceId, trace.spanId, span]) {
      assert.ok(!/^0+$/.test(id));
      assert.ok(!seen.has(id), `${id} drawn twice`);
      seen.add(id);
    }
    // What goes upstream parses back as valid W3C Trace Context.
    const parsed = parseTraceparent(formatTraceparent(trace, span));
    assert.deepEqual(parsed, { traceId: trace.traceId, parentSpanId: span, flags: 1 });
  }
});

Deno.test("a client's traceparent is continued with its trace id and flags", () => {
  const headers = new Headers({
    traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
    tracestate: "k=v",
  });
  const trace = incomingTrace(headers, { recording: true });
  assert.equal(trace.traceId, "4bf92f3577b34da6a3ce929d0e0e4736");
  assert.equal(trace.parentSpanId, "00f067aa0ba902b7");
  assert.equal(trace.flags, 0);
  assert.equal(trace.traceState, "k=v");
  assert.equal(trace.recorded, false);
  assert.match(trace.spanId, /^[0-9a-f]{16}$/);
});
