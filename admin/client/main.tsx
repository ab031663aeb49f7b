/**
 * The browser entry of /admin, bundled into admin/assets.gen.ts by `deno task admin:build`.
 * This is the only module that touches the DOM, storage, timers and the network: it builds the
 * models from them and mounts one Preact island per `data-island` element of the page shell.
 */
import { effect, untracked } from "@preact/signals";
import { type ComponentChildren, render } from "preact";
import { createAborts } from "./aborts.ts";
import { createAdminApi } from "./api.ts";
import { createAuth, resumeSession, signIn } from "./auth.ts";
import { createConfigModel } from "./config_model.ts";
import { createCosts } from "./cost_model.ts";
import { createFences } from "./fences_model.ts";
import { CostPanel } from "./islands/costs.tsx";
import { createHealth } from "./health_model.ts";
import { createHistory } from "./history_model.ts";
import { ConfigEditor } from "./islands/config_editor.tsx";
import { History } from "./islands/history.tsx";
import { LiveRequests } from "./islands/live_requests.tsx";
import { Login } from "./islands/login.tsx";
import { SafeMode } from "./islands/safe_mode.tsx";
import { SignedIn } from "./islands/signed_in.tsx";
import { Trends } from "./islands/trends.tsx";
import { UpstreamHealth } from "./islands/upstream_health.tsx";
import { createLiveFeed } from "./live_feed.ts";
import { createTrends } from "./trends_model.ts";
import { createSessions } from "./sessions_model.ts";
import { createRetention } from "./retention_model.ts";
import { SessionsPanel } from "./islands/sessions.tsx";

const HEALTH_EVERY_MS = 2000;
// Trends read up to a day of history: refreshed less often than health, and on demand.
const TRENDS_EVERY_MS = 15_000;
// Sessions read a day of history too, but their hit rates move with every turn.
const SESSIONS_EVERY_MS = 5_000;

const now = () => Date.now();
const wait = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const id = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(id);
      resolve();
    }, { once: true });
  });

const auth = createAuth(sessionStorage);
const api = createAdminApi({
  fetch: (input, init) => fetch(input, init),
  token: () => auth.token.peek(),
  refused: (message) => auth.signOut(`The gateway refused the admin token: ${message}.`),
});
const feed = createLiveFeed({ open: (query, signal) => api.live(query, signal), wait });
const fences = createFences(api, { now });
const aborts = createAborts(api, { fences });
const history = createHistory(api);
const health = createHealth(api);
const config = createConfigModel(api);
const costs = createCosts(api, { now });
const trends = createTrends((filters) => api.trends(filters));
const sessions = createSessions(api);
const retention = createRetention(api);

function mount(name: string, island: ComponentChildren): void {
  const host = document.querySelector(`[data-island="${name}"]`);
  if (host) render(<>{island}</>, host);
}

const gated = (island: ComponentChildren) => <SignedIn auth={auth}>{island}</SignedIn>;

mount("login", <Login auth={auth} onSignIn={(token) => void signIn(api, { auth, token })} />);
mount("safe-mode", gated(<SafeMode config={config} />));
mount("live", gated(<LiveRequests feed={feed} aborts={aborts} />));
mount("sessions", gated(<SessionsPanel sessions={sessions} aborts={aborts} now={now} />));
mount("trends", gated(<Trends trends={trends} />));
mount("history", gated(<History history={history} now={now} retention={retention} />));
mount("health", gated(<UpstreamHealth health={health} />));
mount("config", gated(<ConfigEditor config={config} now={now} />));
mount("costs", gated(<CostPanel costs={costs} now={now} />));

// Panels load when the tab signs in and forget everything when it signs out.
let healthTimer: ReturnType<typeof setInterval> | undefined;
let trendsTimer: ReturnType<typeof setInterval> | undefined;
let sessionsTimer: ReturnType<typeof setInterval> | undefined;
effect(() => {
  const signedIn = auth.status.value === "signed_in";
  document.body.dataset.auth = auth.status.value;
  untracked(() => {
    clearInterval(healthTimer);
    clearInterval(trendsTimer);
    clearInterval(sessionsTimer);
    if (!signedIn) {
      feed.stop();
      health.clear();
      trends.clear();
      config.clear();
      costs.clear();
      sessions.clear();
      retention.clear();
      fences.clear();
      return;
    }
    feed.start();
    void history.search({});
    void retention.refresh();
    void health.refresh();
    void config.load();
    void costs.refresh();
    healthTimer = setInterval(() => void health.refresh(), HEALTH_EVERY_MS);
    void trends.refresh();
    trendsTimer = setInterval(() => void trends.refresh(), TRENDS_EVERY_MS);
    // The fences are listed in the Sessions panel: read with it.
    const refreshSessions = () => void Promise.all([sessions.refresh(), fences.refresh()]);
    refreshSessions();
    sessionsTimer = setInterval(refreshSessions, SESSIONS_EVERY_MS);
  });
});

// A request that leaves the live list has just been recorded: show it on the newest page. One
// that leaves because the operator asked another view or page has not.
let liveIds = new Set<string>();
let livePage = "";
effect(() => {
  const ids = new Set((feed.snapshot.value?.requests ?? []).map((r) => r.id));
  const samePage = feed.shown.value === livePage;
  livePage = feed.shown.value;
  const ended = samePage && [...liveIds].some((id) => !ids.has(id));
  liveIds = ids;
  if (ended) {
    untracked(() => history.trail.value.length === 1 && void history.refresh());
    untracked(() => void Promise.all([sessions.refresh(), fences.refresh()]));
  }
});

void resumeSession(api, auth);
