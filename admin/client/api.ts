import type {
  AbortResult,
  ApiError,
  ConfigChecked,
  ConfigProblem,
  ConfigSaved,
  ConfigView,
  CostReport,
  FencesView,
  HealthView,
  HistoryCursor,
  HistoryOutcome,
  HistoryPage,
  KeysView,
  RepairAction,
  RequestDetail,
  SessionInfo,
  UpstreamControlResult,
} from "../api_types.ts";
import type { TrendsView, TrendWindow } from "../trends_types.ts";
import type { SessionsView } from "../sessions_types.ts";
import type { RetentionView } from "../retention_types.ts";
import type { ConfigVersion, ConfigVersionList } from "../config_versions_types.ts";

export type Fetch = (input: string, init?: RequestInit) => Promise<Response>;

/** A refused or failed call, with the gateway's code and, for config saves, its problems. */
export class ApiFailure extends Error {
  constructor(
    message: string,
    readonly detail: { status: number; code: string; problems: ConfigProblem[] },
  ) {
    super(message);
  }
}

export interface HistoryFilters {
  route?: string;
  upstream?: string;
  outcome?: HistoryOutcome;
  session?: string;
  since?: number;
  until?: number;
}

export interface AdminApi {
  session(token: string | null): Promise<SessionInfo>;
  /** The live feed for a view and page: `query` is its URL parameters (live_view.ts). */
  live(query: string, signal: AbortSignal): Promise<Response>;
  history(filters: HistoryFilters, opts: { before?: HistoryCursor }): Promise<HistoryPage>;
  request(id: string): Promise<RequestDetail>;
  health(): Promise<HealthView>;
  costs(query: { by: CostReport["by"]; since: number }): Promise<CostReport>;
  keys(): Promise<KeysView>;
  config(): Promise<ConfigView>;
  checkConfig(document: unknown): Promise<ConfigChecked>;
  saveConfig(document: unknown): Promise<ConfigSaved>;
  repairConfig(actions: RepairAction[]): Promise<ConfigSaved>;
  abortRequest(id: string): Promise<AbortResult>;
  abortSession(id: string): Promise<AbortResult>;
  fences(): Promise<FencesView>;
  liftFence(id: string): Promise<{ id: string; lifted: true }>;
  controlUpstream(id: string, action: UpstreamAction): Promise<UpstreamControlResult>;
  trends(filters: { window: TrendWindow; route: string; upstream: string }): Promise<TrendsView>;
  sessions(): Promise<SessionsView>;
  retention(): Promise<RetentionView>;
  configVersions(): Promise<ConfigVersionList>;
  configVersion(id: number): Promise<ConfigVersion>;
  rollbackConfig(id: number): Promise<ConfigSaved>;
}

export type UpstreamAction = "resume" | "enable" | "disable";

export interface ApiIo {
  fetch: Fetch;
  /** The admin token of this tab, or null when the gateway needs none. */
  token: () => string | null;
  /** Told when the gateway answers 401, so the page can ask for the token again. */
  refused: (message: string) => void;
}

/**
 * The admin JSON API and the docs/design.md "Abort and disconnect" abort endpoints, with the tab's token sent as
 * `Authorization: Bearer` on every call. Nothing here touches the DOM.
 */
export function createAdminApi(io: ApiIo): AdminApi {
  const call = async <T>(
    path: string,
    opts: { method?: string; body?: unknown; token?: string | null; signal?: AbortSignal } = {},
  ): Promise<T> => {
    const res = await send(path, opts);
    return (await res.json()) as T;
  };
  const send = async (
    path: string,
    opts: { method?: string; body?: unknown; token?: string | null; signal?: AbortSignal },
  ): Promise<Response> => {
    const headers: Record<string, string> = {};
    const token = opts.token === undefined ? io.token() : opts.token;
    if (token) headers.authorization = `Bearer ${token}`;
    if (opts.body !== undefined) headers["content-type"] = "application/json";
    const res = await io.fetch(path, {
      method: opts.method ?? "GET",
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      signal: opts.signal,
    });
    if (res.ok) return res;
    const failure = await failureOf(res);
    // A sign-in attempt reports its own refusal; any other 401 means the token went stale.
    if (res.status === 401 && opts.token === undefined) io.refused(failure.message);
    throw failure;
  };
  const change = <T>(path: string, opts: { method: string; body?: unknown }) =>
    call<T>(path, { method: opts.method, body: opts.body === undefined ? {} : opts.body });
  return {
    session: (token) => call<SessionInfo>("/admin/api/session", { token }),
    live: (query, signal) => send(`/admin/api/live${query ? `?${query}` : ""}`, { signal }),
    history: (filters, opts) =>
      call<HistoryPage>(`/admin/api/requests?${historyQuery(filters, opts)}`),
    request: (id) => call<RequestDetail>(`/admin/api/requests/${encodeURIComponent(id)}`),
    health: () => call<HealthView>("/admin/api/health"),
    costs: ({ by, since }) => call<CostReport>(`/admin/api/costs?by=${by}&since=${since}`),
    keys: () => call<KeysView>("/admin/api/keys"),
    config: () => call<ConfigView>("/admin/api/config"),
    checkConfig: (document) =>
      change<ConfigChecked>("/admin/api/config/validate", { method: "POST", body: document }),
    saveConfig: (document) =>
      change<ConfigSaved>("/admin/api/config", { method: "PUT", body: document }),
    repairConfig: (actions) =>
      change<ConfigSaved>("/admin/api/config/repair", { method: "POST", body: { actions } }),
    abortRequest: (id) =>
      change<AbortResult>(`/request/${encodeURIComponent(id)}/abort`, { method: "POST" }),
    abortSession: (id) =>
      change<AbortResult>(`/sessions/${encodeURIComponent(id)}/abort`, { method: "POST" }),
    fences: () => call<FencesView>("/admin/api/fences"),
    liftFence: (id) =>
      call<{ id: string; lifted: true }>(`/admin/api/fences/${encodeURIComponent(id)}`, {
        method: "DELETE",
      }),
    controlUpstream: (id, action) =>
      change<UpstreamControlResult>(
        `/admin/api/upstreams/${encodeURIComponent(id)}/${action}`,
        { method: "POST" },
      ),
    trends: (filters) => call<TrendsView>(`/admin/api/trends?${new URLSearchParams(filters)}`),
    sessions: () => call<SessionsView>("/admin/api/sessions"),
    retention: () => call<RetentionView>("/admin/api/history/retention"),
    configVersions: () => call<ConfigVersionList>("/admin/api/config/versions"),
    configVersion: (id) => call<ConfigVersion>(`/admin/api/config/versions/${id}`),
    rollbackConfig: (id) =>
      change<ConfigSaved>(`/admin/api/config/versions/${id}/rollback`, { method: "POST" }),
  };
}

function historyQuery(filters: HistoryFilters, opts: { before?: HistoryCursor }): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(filters)) {
    if (value !== undefined && value !== "") params.set(name, String(value));
  }
  if (opts.before) {
    params.set("before_at", String(opts.before.startedAt));
    params.set("before_id", opts.before.id);
  }
  return params.toString();
}

async function failureOf(res: Response): Promise<ApiFailure> {
  const body: unknown = await res.json().catch(() => null);
  const error = isApiError(body) ? body : null;
  return new ApiFailure(error?.error.message ?? `HTTP ${res.status}`, {
    status: res.status,
    code: error?.error.code ?? `http.${res.status}`,
    problems: error?.problems ?? [],
  });
}

function isApiError(body: unknown): body is ApiError {
  if (typeof body !== "object" || body === null || !("error" in body)) return false;
  const error = body.error;
  return typeof error === "object" && error !== null && "message" in error && "code" in error;
}

/**
 * Whether a read was stopped at the gateway's bound (docs/scaling.md "Admin reads"): the same
 * filters will be refused again, so a panel shows the message (which says what narrows the
 * query) in place of the rows it showed for other filters.
 */
export function tooLarge(err: unknown): boolean {
  return err instanceof ApiFailure && err.detail.code === "admin.query_too_large";
}

/** A readable sentence for any failure a call may throw. */
export function describeFailure(err: unknown): string {
  if (err instanceof ApiFailure) return `${err.message} (${err.detail.code})`;
  if (err instanceof Error) return err.message;
  return String(err);
}
