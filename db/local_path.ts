// No driver import: `deno task start`'s launcher reads this without loading libSQL.

/** The file path of a `file:` URL, or null for remote and in-memory databases. */
export function localFilePath(url: string): string | null {
  if (!url.startsWith("file:")) return null;
  let rest = url.slice("file:".length);
  const query = rest.indexOf("?");
  if (query >= 0) rest = rest.slice(0, query);
  // `file://localhost/abs` and `file:///abs` both name `/abs`.
  if (rest.startsWith("//")) {
    const slash = rest.indexOf("/", 2);
    rest = slash >= 0 ? rest.slice(slash) : "";
  }
  const path = decodeURIComponent(rest);
  return path === "" || path === ":memory:" ? null : path;
}
