/** Byte chunks read one by one, copied into one array. */
export function concatBytes(chunks: readonly Uint8Array[]): Uint8Array {
  const size = chunks.reduce((n, c) => n + c.byteLength, 0);
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return bytes;
}

/** The text of byte chunks read one by one, decoded once (a chunk may split a character). */
export function joinBytes(chunks: readonly Uint8Array[]): string {
  return new TextDecoder().decode(concatBytes(chunks));
}
