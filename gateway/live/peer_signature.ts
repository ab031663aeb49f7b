/**
 * Instance-to-instance calls (abort forwarding, docs/scaling.md) are signed with the shared
 * `PULSEGATE_PEER_SECRET`: HMAC-SHA256 over method, path, a timestamp and the body. No caller
 * credential ever travels between instances; the body says whose abort it is.
 */

export const PEER_SIGNATURE_HEADER = "x-pulsegate-peer-signature";
export const PEER_TIMESTAMP_HEADER = "x-pulsegate-peer-timestamp";

/**
 * How far a signed call's timestamp may be from the receiver's clock, either way. Real time, not
 * scaled: it covers clock skew between hosts and the trip itself, neither of which shrinks in a
 * scaled test.
 */
export const PEER_SIGNATURE_WINDOW_MS = 30_000;

/** Bodies of peer calls are a few dozen bytes; anything much larger is not one. */
export const PEER_BODY_MAX_BYTES = 4_096;

export interface PeerCall {
  method: string;
  path: string;
  body: string;
}

const encoder = new TextEncoder();
const keys = new Map<string, Promise<CryptoKey>>();

function hmacKey(secret: string): Promise<CryptoKey> {
  let key = keys.get(secret);
  if (!key) {
    key = crypto.subtle.importKey(
      "raw",
      encoder.encode(secret),
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign", "verify"],
    );
    keys.set(secret, key);
  }
  return key;
}

function signedText(call: PeerCall, timestamp: string): Uint8Array<ArrayBuffer> {
  return encoder.encode(`${call.method.toUpperCase()}\n${call.path}\n${timestamp}\n${call.body}`);
}

/** The two headers that prove a call comes from an instance holding the secret. */
export async function signPeerCall(
  call: PeerCall,
  opts: { secret: string; now: number },
): Promise<Record<string, string>> {
  const timestamp = String(Math.floor(opts.now));
  const mac = await crypto.subtle.sign(
    "HMAC",
    await hmacKey(opts.secret),
    signedText(call, timestamp),
  );
  return {
    [PEER_TIMESTAMP_HEADER]: timestamp,
    [PEER_SIGNATURE_HEADER]: toHex(new Uint8Array(mac)),
  };
}

/**
 * Whether the call carries a valid signature made within the window. `crypto.subtle.verify`
 * compares in constant time.
 */
export async function verifyPeerCall(
  call: PeerCall & { headers: Headers },
  opts: { secret: string; now: number },
): Promise<boolean> {
  const timestamp = call.headers.get(PEER_TIMESTAMP_HEADER) ?? "";
  const signature = fromHex(call.headers.get(PEER_SIGNATURE_HEADER) ?? "");
  if (!/^\d{1,16}$/.test(timestamp) || signature === null) return false;
  if (Math.abs(opts.now - Number(timestamp)) > PEER_SIGNATURE_WINDOW_MS) return false;
  const key = await hmacKey(opts.secret);
  return await crypto.subtle.verify("HMAC", key, signature, signedText(call, timestamp));
}

function toHex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function fromHex(text: string): Uint8Array<ArrayBuffer> | null {
  if (!/^[0-9a-f]{64}$/.test(text)) return null;
  const bytes = new Uint8Array(32);
  for (let i = 0; i < 32; i++) bytes[i] = parseInt(text.slice(i * 2, i * 2 + 2), 16);
  return bytes;
}
