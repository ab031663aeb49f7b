import { REAL_TIME } from "../../runtime/clock.ts";
/**
 * An access token that is fetched once, shared by every call, and renewed before it expires,
 * with one fetch in flight at a time whoever asks (docs/providers.md "Vertex AI"). Token
 * lifetimes are the issuer's wall-clock time, not the gateway's scaled clock.
 */

export interface TokenGrant {
  token: string;
  /** Wall-clock ms when the issuer stops taking it. */
  expiresAt: number;
}

/** Renewed this long before it expires (at most half its life): Google's own libraries use 5 min. */
const RENEW_BEFORE_MS = 5 * 60_000;
/**
 * A token with less than this left is not sent: a long answer may be refused half-way through.
 * Never more than a quarter of its life, so a short-lived token is still used.
 */
const MIN_LEFT_MS = 30_000;
/**
 * After a failed fetch none starts for this long, doubled for each further failure in a row up to
 * RETRY_MAX_MS; callers without a usable token get the failure at once meanwhile. Without it,
 * every request that needed a token while the endpoint failed fast started a fetch of its own
 * (and signed an assertion for it): as many token calls as requests.
 */
const RETRY_FIRST_MS = 1_000;
const RETRY_MAX_MS = 60_000;

export class TokenSource {
  #grant: TokenGrant | null = null;
  #issuedAt = 0;
  #inFlight: Promise<TokenGrant> | null = null;
  /** The last fetch failed: its error, and until when (our clock) no other fetch starts. */
  #failed: { error: unknown; until: number } | null = null;
  /** Fetches failed in a row: the backoff doubles with each. */
  #failures = 0;
  readonly #fetchGrant: () => Promise<TokenGrant>;
  readonly #now: () => number;

  constructor(fetchGrant: () => Promise<TokenGrant>, opts: { now?: () => number } = {}) {
    this.#fetchGrant = fetchGrant;
    // A token's lifetime is the cloud's, in real time whatever the gateway's clock.
    this.#now = opts.now ?? REAL_TIME.now;
  }

  /**
   * A usable token: the held one while it has time left (renewed in the background once it is
   * near its end), else a fresh one, waited for. A failed fetch rejects every caller waiting on
   * it, and every caller after it until its backoff is over (RETRY_FIRST_MS, doubling); then
   * the next call tries again. `signal` stops this caller's wait only.
   */
  async token(opts: { signal?: AbortSignal } = {}): Promise<string> {
    const now = this.#now();
    const grant = this.#grant;
    if (grant && now < grant.expiresAt - this.#minLeft(grant)) {
      if (now >= grant.expiresAt - this.#renewBefore(grant)) this.#renewInBackground(now);
      return grant.token;
    }
    const failed = this.#failed;
    if (failed && !this.#inFlight && now < failed.until) throw failed.error;
    return (await waitFor(this.#renew(), opts.signal)).token;
  }

  #renewBefore(grant: TokenGrant): number {
    return Math.min(RENEW_BEFORE_MS, (grant.expiresAt - this.#issuedAt) / 2);
  }

  #minLeft(grant: TokenGrant): number {
    return Math.min(MIN_LEFT_MS, (grant.expiresAt - this.#issuedAt) / 4);
  }

  #renewInBackground(now: number): void {
    if (this.#inFlight || now < (this.#failed?.until ?? -Infinity)) return;
    this.#renew().catch(() => {}); // the held token still serves; the failure is remembered
  }

  #renew(): Promise<TokenGrant> {
    this.#inFlight ??= (async () => {
      const issuedAt = this.#now();
      try {
        const grant = await this.#fetchGrant();
        this.#grant = grant;
        this.#issuedAt = issuedAt;
        this.#failed = null;
        this.#failures = 0;
        return grant;
      } catch (err) {
        const wait = Math.min(RETRY_FIRST_MS * 2 ** this.#failures, RETRY_MAX_MS);
        this.#failures++;
        this.#failed = { error: err, until: this.#now() + wait };
        throw err;
      } finally {
        this.#inFlight = null;
      }
    })();
    return this.#inFlight;
  }
}

/** The promise, unless the signal stops the wait first (the promise runs on for the others). */
function waitFor<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const stop = () => reject(signal.reason);
    signal.addEventListener("abort", stop, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", stop));
  });
}
