/** The longest URL the config takes (docs/security.md, "URL lengths"). */
export const MAX_URL_CHARS = 2048;

/**
 * The text without its trailing slashes. A loop, not `/\/+$/`: that regex
 * restarts at every slash of a long run that is not at the end, so it costs
 * the square of the run (80 KB of slashes took 11 s).
 */
export function withoutTrailingSlashes(text: string): string {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 47) end--;
  return end === text.length ? text : text.slice(0, end);
}
