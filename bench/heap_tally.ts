/** Self sizes and counts by node type and constructor, from a V8 heap snapshot file. */
export interface Tally {
  bytes: number;
  count: number;
}

export async function heapTally(file: string): Promise<Map<string, Tally>> {
  const snap = JSON.parse(await Deno.readTextFile(file));
  const fields: string[] = snap.snapshot.meta.node_fields;
  const types: string[] = snap.snapshot.meta.node_types[0];
  const width = fields.length;
  const [typeAt, nameAt, sizeAt] = ["type", "name", "self_size"].map((f) => fields.indexOf(f));
  const out = new Map<string, Tally>();
  const nodes: number[] = snap.nodes;
  for (let i = 0; i < nodes.length; i += width) {
    const type = types[nodes[i + typeAt!]!]!;
    const name = type === "object" || type === "closure"
      ? String(snap.strings[nodes[i + nameAt!]!]).slice(0, 60)
      : "";
    const key = `${type} ${name}`.trim();
    const t = out.get(key) ?? { bytes: 0, count: 0 };
    t.bytes += nodes[i + sizeAt!]!;
    t.count++;
    out.set(key, t);
  }
  return out;
}
