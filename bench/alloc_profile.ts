/**
 * Allocations per request, from V8's sampling heap profiler (`HeapProfiler.startSampling` over
 * the in-process inspector session, bench/self_profiler.ts) with the objects later collected by
 * minor and major GCs included: what is allocated, not what survived. V8 samples one allocation
 * per `interval` bytes on average (a Poisson process over bytes) and scales each sample of `s`
 * bytes to `c = ⌊1 / (1 − e^(−s/interval)) + ½⌋` allocations (`SamplingHeapProfiler::ScaleSample`);
 * the protocol then reports the sample's size as `s × c` (v8-heap-profiler-agent-impl.cc), so
 * the object count is recovered here by finding the `c` that reproduces it. With an interval of
 * 8 bytes (the default of bench/profile_gateway.ts) every heap object (16 bytes at least) is
 * reported at its own size, so its size is known and the count near exact (an object of `s`
 * bytes is sampled with probability 1 − e^(−s/8), at least 86 %, and counts for 1/that); with
 * a large interval small objects' sizes are ambiguous and the count is an estimate.
 */

/** `HeapProfiler.SamplingHeapProfile` of the DevTools protocol, the parts read here. */
export interface SamplingHeapProfile {
  head: SamplingNode;
  samples: Array<{ size: number; nodeId: number; ordinal: number }>;
}

interface SamplingNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: SamplingNode[];
}

export interface AllocationSite {
  /** `function (url:line)`, the url as V8 reports it. */
  name: string;
  url: string;
  objects: number;
  bytes: number;
}

export interface AllocationSummary {
  interval: number;
  /** Raw samples taken: the estimate's own precision (more is finer). */
  samples: number;
  objects: number;
  bytes: number;
  /** The sites that allocated most objects, most first. */
  sites: AllocationSite[];
}

export function summarizeAllocations(
  profile: SamplingHeapProfile,
  opts: { interval: number; top: number },
): AllocationSummary {
  const frames = new Map<number, SamplingNode["callFrame"]>();
  const walk = (node: SamplingNode) => {
    frames.set(node.id, node.callFrame);
    for (const child of node.children) walk(child);
  };
  walk(profile.head);
  const sites = new Map<string, AllocationSite>();
  let objects = 0;
  let bytes = 0;
  for (const sample of profile.samples) {
    const count = scaledCount(sample.size, opts.interval);
    objects += count;
    bytes += sample.size;
    const frame = frames.get(sample.nodeId);
    const name = frame?.url
      ? `${frame.functionName || "(anonymous)"} (${frame.url}:${frame.lineNumber + 1})`
      : frame?.functionName || "(unknown)";
    const site = sites.get(name) ?? { name, url: frame?.url ?? "", objects: 0, bytes: 0 };
    site.objects += count;
    site.bytes += sample.size;
    sites.set(name, site);
  }
  return {
    interval: opts.interval,
    samples: profile.samples.length,
    objects,
    bytes,
    sites: [...sites.values()].sort((a, b) => b.objects - a.objects).slice(0, opts.top),
  };
}

/**
 * How many allocations a reported sample of `scaled` bytes stands for: the `c` that V8's rounding
 * reproduces gives the object's size, and the unrounded 1 / (1 − e^(−size/interval)) of that
 * size is the unbiased count (see above).
 */
export function scaledCount(scaled: number, interval: number): number {
  for (let c = 1; c <= scaled; c++) {
    const size = scaled / c;
    if (!Number.isInteger(size)) continue;
    const scale = 1 / (1 - Math.exp(-size / interval));
    if (Math.floor(scale + 0.5) === c) return scale;
  }
  return 1;
}
