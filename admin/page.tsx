import { renderToString } from "preact-render-to-string";

export interface PageAssets {
  /** Hashed file names under /admin/assets/. */
  script: string;
  style: string;
}

const SECTIONS = [
  ["live", "Live"],
  ["sessions", "Sessions"],
  ["trends", "Trends"],
  ["history", "History"],
  ["health", "Health"],
  ["costs", "Cost"],
  ["config", "Config"],
] as const;

/**
 * The admin shell: static markup with one empty host per island, filled in by the bundled
 * script (admin/client/main.tsx). It carries no data, so it is served without a token; every
 * number on the page comes from /admin/api/ after sign-in.
 */
export function renderAdminPage(
  opts: {
    demo: boolean;
    assets: PageAssets;
    /** Why history is not reaching the database right now (docs/deploy.md); absent when it is. */
    historyNotice?: string | null;
  },
): string {
  return "<!doctype html>" + renderToString(
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>pulsegate admin</title>
        <link rel="icon" href="data:," />
        <link rel="stylesheet" href={`/admin/assets/${opts.assets.style}`} />
        <script type="module" src={`/admin/assets/${opts.assets.script}`} />
      </head>
      <body data-auth="checking">
        {opts.demo && (
          <p class="demo">
            Demo profile: every upstream here is SIMULATED inside this process.
          </p>
        )}
        {opts.historyNotice && (
          <p class="demo history-notice" role="alert">
            History is not being saved to a database: {opts.historyNotice}
          </p>
        )}
        <header class="top">
          <h1>pulsegate</h1>
          <nav aria-label="Sections">
            {SECTIONS.map(([id, label]) => <a key={id} href={`#${id}`}>{label}</a>)}
          </nav>
          <div data-island="login" />
        </header>
        <main>
          <noscript>
            <p>This page needs JavaScript. The same data is served as JSON under /admin/api/.</p>
          </noscript>
          <div data-island="safe-mode" />
          {SECTIONS.map(([id]) => <div key={id} id={id} data-island={id} />)}
        </main>
      </body>
    </html>,
  );
}
