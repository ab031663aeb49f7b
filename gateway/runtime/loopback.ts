/** Whether a host name or address is this machine's loopback (docs/design.md "Client API"). */
export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || host === "[::1]" || /^127\./.test(host);
}
