/**
 * A Google service-account key, and the access token it is worth: a JWT signed RS256 with the
 * key (WebCrypto), exchanged at the key's `token_uri` with the JWT bearer grant (RFC 7523),
 * as Google documents it for server-to-server calls (docs/providers.md "Vertex AI").
 */
import { GatewayError } from "../../runtime/gateway_error.ts";
import { isRecord, parseJson } from "../../runtime/json.ts";
import { readCapped } from "../upstream_caps.ts";
import type { TokenGrant } from "./token_source.ts";

/** What the token is asked for: every Vertex AI method takes the cloud-platform scope. */
export const CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform";
const DEFAULT_TOKEN_URI = "https://oauth2.googleapis.com/token";
const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/** Google accepts an assertion valid for at most an hour. */
const ASSERTION_SECS = 3600;
/** A token answer larger than this is not a token answer. */
const TOKEN_ANSWER_BYTES = 64 * 1024;
/** The shortest and the longest lifetime a token is taken to have (see `tokenSecs`). */
const TOKEN_MIN_SECS = 60;
const TOKEN_MAX_SECS = 3600;
/** A token endpoint slower than this is a failed one (a network bound: not scaled). */
export const TOKEN_TIMEOUT_MS = 10_000;

export interface ServiceAccount {
  clientEmail: string;
  tokenUri: string;
  privateKeyId?: string;
  key: CryptoKey;
}

/** A config fault: what the variable holds is not a usable key. Never quotes the key. */
function badKey(what: string): GatewayError {
  return new GatewayError(`the service-account key ${what}`, {
    code: "gw.upstream.credentials",
    source: "config",
    status: 502,
  });
}

/**
 * Reads the JSON text of a key as the console downloads it. The key is PKCS #8 PEM; the token
 * URI must be https (or http on loopback, for a local endpoint): the signed assertion is as good
 * as a token for an hour to whoever reads it.
 */
export async function readServiceAccount(text: string): Promise<ServiceAccount> {
  // The parser's own message may quote the text: ours never does.
  const json = parseJson(text);
  if (!isRecord(json)) throw badKey("is not a JSON object");
  const { client_email, private_key, private_key_id, token_uri } = json;
  if (typeof client_email !== "string" || !client_email) throw badKey("has no client_email");
  if (typeof private_key !== "string") throw badKey("has no private_key");
  const tokenUri = typeof token_uri === "string" && token_uri ? token_uri : DEFAULT_TOKEN_URI;
  if (!safeTokenUri(tokenUri)) {
    throw badKey("has a token_uri that is neither https nor http on a loopback address");
  }
  return {
    clientEmail: client_email,
    tokenUri,
    privateKeyId: typeof private_key_id === "string" ? private_key_id : undefined,
    key: await importPrivateKey(private_key),
  };
}

function safeTokenUri(uri: string): boolean {
  const url = URL.parse(uri);
  if (!url) return false;
  if (url.protocol === "https:") return true;
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  return url.protocol === "http:" &&
    (host === "127.0.0.1" || host === "::1" || host === "localhost");
}

async function importPrivateKey(pem: string): Promise<CryptoKey> {
  const body = pem.replace(/-----(BEGIN|END) PRIVATE KEY-----/g, "").replace(/\s+/g, "");
  let der: Uint8Array<ArrayBuffer>;
  try {
    der = Uint8Array.from(atob(body), (c) => c.charCodeAt(0));
  } catch {
    throw badKey("has a private_key that is not PEM");
  }
  try {
    return await crypto.subtle.importKey(
      "pkcs8",
      der,
      { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
      false,
      ["sign"],
    );
  } catch {
    throw badKey("has a private_key that is not an RSA PKCS #8 key");
  }
}

const encoder = new TextEncoder();

function base64url(bytes: Uint8Array | string): string {
  const raw = typeof bytes === "string" ? encoder.encode(bytes) : bytes;
  let binary = "";
  for (const byte of raw) binary += String.fromCharCode(byte);
  return btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

/** The signed assertion: `iss` the account, `aud` its token URI, valid for an hour from `now`. */
export async function signedAssertion(
  account: ServiceAccount,
  opts: { now: number; scope?: string },
): Promise<string> {
  const iat = Math.floor(opts.now / 1000);
  const header = {
    alg: "RS256",
    typ: "JWT",
    ...(account.privateKeyId && { kid: account.privateKeyId }),
  };
  const claims = {
    iss: account.clientEmail,
    scope: opts.scope ?? CLOUD_PLATFORM_SCOPE,
    aud: account.tokenUri,
    iat,
    exp: iat + ASSERTION_SECS,
  };
  const input = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(claims))}`;
  const signature = await crypto.subtle.sign(
    "RSASSA-PKCS1-v1_5",
    account.key,
    encoder.encode(input),
  );
  return `${input}.${base64url(new Uint8Array(signature))}`;
}

/** An upstream failure: the token endpoint did not give us a token. Charged to the upstream. */
function noToken(detail: string, cause?: unknown): GatewayError {
  return new GatewayError(`could not get an access token: ${detail}`, {
    code: "gw.upstream.credentials",
    cause,
  });
}

/** Exchanges a fresh assertion for an access token. */
export async function fetchAccessToken(
  account: ServiceAccount,
  opts: { now: number; fetch: typeof fetch },
): Promise<TokenGrant> {
  const assertion = await signedAssertion(account, { now: opts.now });
  let res: Response;
  try {
    res = await opts.fetch(account.tokenUri, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: JWT_BEARER, assertion }).toString(),
      signal: AbortSignal.timeout(TOKEN_TIMEOUT_MS),
    });
  } catch (err) {
    throw noToken(`the token endpoint could not be reached (${errorText(err)})`, err);
  }
  let text: string;
  try {
    text = await readCapped(res, TOKEN_ANSWER_BYTES);
  } catch (err) {
    throw noToken(`the token endpoint's answer could not be read (${errorText(err)})`, err);
  }
  const answer = parseJson(text);
  if (!res.ok) throw noToken(`the token endpoint answered ${res.status}${oauthError(answer)}`);
  const token = isRecord(answer) ? answer.access_token : undefined;
  const expiresIn = isRecord(answer) ? answer.expires_in : undefined;
  if (typeof token !== "string" || !/^[\x21-\x7e]{1,4096}$/.test(token)) {
    throw noToken("the token endpoint's answer holds no access_token");
  }
  return { token, expiresAt: opts.now + tokenSecs(expiresIn) * 1000 };
}

/**
 * The lifetime a token is kept for, from the answer's `expires_in` (docs/providers.md "Vertex
 * AI"). Google says 3599 s, and a jwt-bearer grant is never worth more than an hour: a longer one
 * is taken as TOKEN_MAX_SECS, or a token the issuer has dropped would be sent (and refused) for as
 * long as it claimed. One under TOKEN_MIN_SECS is taken as that: renewed at half its life, a token
 * of a second cost a fetch per request. None, or one that is not a positive number, is taken as a
 * short one.
 */
function tokenSecs(expiresIn: unknown): number {
  if (typeof expiresIn !== "number" || !(expiresIn > 0)) return 300;
  return Math.min(Math.max(expiresIn, TOKEN_MIN_SECS), TOKEN_MAX_SECS);
}

/** OAuth's `error` and `error_description`, bounded: they are not secret, and say what is wrong. */
function oauthError(answer: unknown): string {
  if (!isRecord(answer)) return "";
  const words = [answer.error, answer.error_description]
    .filter((w): w is string => typeof w === "string")
    .join(": ")
    .slice(0, 200);
  return words ? ` (${words})` : "";
}

function errorText(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 200);
}
