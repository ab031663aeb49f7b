/**
 * A local OAuth 2.0 token endpoint as Google runs one for service accounts: it takes a JWT
 * bearer grant (RFC 7523), verifies the assertion's RS256 signature with the account's public
 * key and its claims (issuer, audience, scope, an hour's life, issued now), and answers an
 * access token. Each fake makes its own RSA key pair; `serviceAccountJson()` is the key file the
 * console would download, with `token_uri` pointing here. Real HTTP on 127.0.0.1.
 */

export const CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform";
const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";

export interface TokenCall {
  /** What the endpoint made of the grant: the verified claims, or why it refused. */
  claims?: Record<string, unknown>;
  refused?: string;
  /** The token it answered, if any. */
  token?: string;
}

export interface FakeOAuth extends AsyncDisposable {
  tokenUri: string;
  clientEmail: string;
  privateKeyId: string;
  calls: TokenCall[];
  /** The key file's JSON text (`private_key` of another pair when `otherKey`). */
  serviceAccountJson(opts?: { otherKey?: boolean; tokenUri?: string }): Promise<string>;
  /** Answers the next grants with this status and OAuth error (500: a broken endpoint). */
  failWith(status: number | null): void;
  /** Holds every answer until `release` settles (the test decides when). */
  holdUntil(release: Promise<unknown> | null): void;
  /** The lifetime the next tokens are given, in seconds (default 3599, as Google says). */
  expiresIn: number;
  close(): Promise<void>;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function fromBase64url(text: string): Uint8Array<ArrayBuffer> {
  const base64 = text.replaceAll("-", "+").replaceAll("_", "/");
  return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
}

async function rsaPair(): Promise<CryptoKeyPair> {
  return await crypto.subtle.generateKey(
    {
      name: "RSASSA-PKCS1-v1_5",
      modulusLength: 2048,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: "SHA-256",
    },
    true,
    ["sign", "verify"],
  );
}

async function pkcs8Pem(key: CryptoKey): Promise<string> {
  const der = new Uint8Array(await crypto.subtle.exportKey("pkcs8", key));
  let binary = "";
  for (const byte of der) binary += String.fromCharCode(byte);
  const lines = btoa(binary).match(/.{1,64}/g)!.join("\n");
  return `-----BEGIN PRIVATE KEY-----\n${lines}\n-----END PRIVATE KEY-----\n`;
}

export async function startFakeOAuth(): Promise<FakeOAuth> {
  const pair = await rsaPair();
  const clientEmail = `gateway@fake-project-${
    crypto.randomUUID().slice(0, 8)
  }.iam.gserviceaccount.com`;
  const privateKeyId = crypto.randomUUID().replaceAll("-", "");
  const calls: TokenCall[] = [];
  let failure: number | null = null;
  let hold: Promise<unknown> | null = null;
  let issued = 0;
  const fake: FakeOAuth = {
    tokenUri: "",
    clientEmail,
    privateKeyId,
    calls,
    expiresIn: 3599,
    serviceAccountJson,
    failWith: (status) => (failure = status),
    holdUntil: (release) => (hold = release),
    close,
    [Symbol.asyncDispose]: close,
  };

  async function verify(assertion: string): Promise<Record<string, unknown> | string> {
    const parts = assertion.split(".");
    if (parts.length !== 3) return "not a JWT";
    const [head, body, signature] = parts as [string, string, string];
    const header = JSON.parse(decoder.decode(fromBase64url(head)));
    if (header.alg !== "RS256" || header.typ !== "JWT") return `header ${JSON.stringify(header)}`;
    if (header.kid !== privateKeyId) return "kid is not the key's private_key_id";
    const good = await crypto.subtle.verify(
      "RSASSA-PKCS1-v1_5",
      pair.publicKey,
      fromBase64url(signature),
      encoder.encode(`${head}.${body}`),
    );
    if (!good) return "Invalid JWT Signature.";
    const claims = JSON.parse(decoder.decode(fromBase64url(body)));
    const now = Date.now() / 1000;
    if (claims.iss !== clientEmail) return "iss is not the account";
    if (claims.aud !== fake.tokenUri) return "aud is not the token URI";
    if (claims.scope !== CLOUD_PLATFORM) return `scope ${claims.scope}`;
    if (Math.abs(claims.iat - now) > 60) return "iat is not now";
    if (claims.exp - claims.iat !== 3600) return "the assertion does not last an hour";
    return claims;
  }

  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const call: TokenCall = {};
    calls.push(call);
    if (hold) await hold;
    const form = new URLSearchParams(await req.text());
    const refuse = (status: number, error: string, description: string) => {
      call.refused = description;
      return Response.json({ error, error_description: description }, { status });
    };
    if (failure !== null) return refuse(failure, "internal_failure", "the fake was told to fail");
    if (req.method !== "POST" || new URL(req.url).pathname !== "/token") {
      return refuse(404, "not_found", `${req.method} ${req.url}`);
    }
    if (req.headers.get("content-type") !== "application/x-www-form-urlencoded") {
      return refuse(400, "invalid_request", "not a form");
    }
    if (form.get("grant_type") !== JWT_BEARER) return refuse(400, "unsupported_grant_type", "");
    const verified = await verify(form.get("assertion") ?? "").catch((e) => String(e));
    if (typeof verified === "string") return refuse(400, "invalid_grant", verified);
    call.claims = verified;
    call.token = `ya29.fake-${++issued}-${privateKeyId.slice(0, 6)}`;
    return Response.json({
      access_token: call.token,
      expires_in: fake.expiresIn,
      token_type: "Bearer",
    });
  });
  fake.tokenUri = `http://127.0.0.1:${server.addr.port}/token`;

  async function serviceAccountJson(opts: { otherKey?: boolean; tokenUri?: string } = {}) {
    const key = opts.otherKey ? (await rsaPair()).privateKey : pair.privateKey;
    return JSON.stringify({
      type: "service_account",
      project_id: "fake-project",
      private_key_id: privateKeyId,
      private_key: await pkcs8Pem(key),
      client_email: clientEmail,
      client_id: "100000000000000000000",
      auth_uri: "https://accounts.google.com/o/oauth2/auth",
      token_uri: opts.tokenUri ?? fake.tokenUri,
    });
  }

  async function close(): Promise<void> {
    await server.shutdown().catch(() => {});
  }

  return fake;
}
