// Inline until deno.json maps the package (then: "aws4fetch").
import { AwsV4Signer } from "aws4fetch";
import type { BedrockUpstream } from "../../config/schema.ts";
import { GatewayError } from "../../runtime/gateway_error.ts";

/** The signing service name of the Bedrock runtime (not "bedrock-runtime", its host prefix). */
export const BEDROCK_SERVICE = "bedrock";

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  region: string;
}

/** Reads an upstream's AWS keys from the environment; a missing one is a config fault. */
export function bedrockCredentials(
  upstream: BedrockUpstream,
  env: (name: string) => string | undefined,
): AwsCredentials {
  const required = (name: string, what: string) => {
    const value = env(name);
    if (value) return value;
    throw new GatewayError(
      `upstream ${upstream.id}: environment variable ${name} (${what}) is not set`,
      { code: "gw.upstream.credentials", source: "config", status: 502 },
    );
  };
  const tokenEnv = upstream.session_token_env;
  return {
    accessKeyId: required(upstream.access_key_env, "AWS access key id"),
    secretAccessKey: required(upstream.secret_key_env, "AWS secret access key"),
    sessionToken: tokenEnv ? required(tokenEnv, "AWS session token") : undefined,
    region: upstream.region,
  };
}

/**
 * A SigV4-signed POST. aws4fetch signs host, x-amz-date and the session token
 * and hashes the exact body, so the body must be sent as the string given here.
 */
export async function signedPost(
  url: string,
  opts: { body: string; credentials: AwsCredentials; datetime?: string },
): Promise<Request> {
  const { credentials } = opts;
  const signer = new AwsV4Signer({
    method: "POST",
    url,
    headers: { "content-type": "application/json" },
    body: opts.body,
    accessKeyId: credentials.accessKeyId,
    secretAccessKey: credentials.secretAccessKey,
    sessionToken: credentials.sessionToken,
    region: credentials.region,
    service: BEDROCK_SERVICE,
    datetime: opts.datetime,
  });
  const signed = await signer.sign();
  return new Request(signed.url, { method: "POST", headers: signed.headers, body: opts.body });
}
