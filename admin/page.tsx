import { renderToString } from "preact-render-to-string";

/** The admin shell. Assets are inlined so a compiled binary serves it without a file system. */
export function renderAdminPage(opts: { demo: boolean }): string {
  return "<!doctype html>" + renderToString(
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>pulsegate admin</title>
      </head>
      <body>
        <h1>pulsegate</h1>
        {opts.demo && (
          <p class="demo">
            Demo profile: every upstream here is SIMULATED inside this process.
          </p>
        )}
        <p>Live requests, history and config editing arrive with the admin issue.</p>
      </body>
    </html>,
  );
}
