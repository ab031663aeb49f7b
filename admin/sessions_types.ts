/** GET /admin/api/sessions (docs/admin.md "Sessions"). */

/** One key's session: its requests in the window, what they cost, and how its cache fared. */
export interface SessionView {
  keyId: string | null;
  sessionId: string;
  /** Named by no client: derived from the prompt (`p:`, docs/observability.md "Cache-aware affinity"). */
  derived: boolean;
  routes: string[];
  upstreams: string[];
  /** Requests recorded in the window, and those running in this process now. */
  requests: number;
  running: number;
  firstAt: number;
  lastAt: number;
  inputTokens: number;
  outputTokens: number;
  /** Input tokens read from the prompt cache, and written to it (parts of the input). */
  cachedTokens: number;
  cacheWriteTokens: number;
  /** cachedTokens / inputTokens; null with no input recorded. */
  cacheHitRate: number | null;
  costUsd: number | null;
  /** Requests that left the session's warm upstream, and their cache writes' USD. */
  moves: number;
  moveCacheWriteUsd: number | null;
  errors: number;
  /** Requests refused by the key's session limits (gw.session.*). */
  budgetRefusals: number;
  loopRefusals: number;
  /** The key's session budget and this process's count against it; null without one. */
  budget: {
    limits: { usd?: number; tokens?: number; requests?: number };
    use: { requests: number; tokens: number; costUsd: number } | null;
  } | null;
}

export interface SessionsView {
  since: number;
  sessions: SessionView[];
}
