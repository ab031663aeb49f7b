/**
 * A request written by hand over TCP to 127.0.0.1, its body sent (or not) piece by piece: what
 * `fetch` cannot do (declare a length and send less, trickle, stop after `Expect:
 * 100-continue`). The answer is read as soon as it is whole, without waiting for the connection
 * to close: after an early answer the server may keep reading what the client still sends.
 */

const encoder = new TextEncoder();

export interface RawBodyAnswer {
  status: number;
  headers: Headers;
  text: string;
  /** Interim (1xx) statuses that came before it, e.g. 100 for `100 Continue`. */
  interim: number[];
}

export class RawBodyClient {
  #buffer = new Uint8Array(0);
  #eof = false;
  /** The end came as a reset (the read failed), not as the server's FIN. */
  #reset = false;
  #reading: Promise<void> | null = null;

  private constructor(private conn: Deno.TcpConn) {}

  /** Connects and sends the request line (a POST unless `method`) and headers, no body. */
  static async open(
    url: string,
    head: { path: string; headers: Record<string, string>; method?: string },
  ): Promise<RawBodyClient> {
    const port = Number(new URL(url).port);
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    const lines = [
      `${head.method ?? "POST"} ${head.path} HTTP/1.1`,
      "host: 127.0.0.1",
      ...Object.entries(head.headers).map(([name, value]) => `${name}: ${value}`),
    ];
    const client = new RawBodyClient(conn);
    await client.write(`${lines.join("\r\n")}\r\n\r\n`);
    return client;
  }

  /** Sends all of `bytes` (a write may take only part); false once the server closed. */
  async write(bytes: string | Uint8Array): Promise<boolean> {
    let left = typeof bytes === "string" ? encoder.encode(bytes) : bytes;
    try {
      while (left.byteLength) left = left.subarray(await this.conn.write(left));
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Sends `piece` every `everyMs` until the answer is whole, the connection closes, or `stop`
   * fires. Resolves with how many pieces went out.
   */
  async trickle(
    piece: string | Uint8Array,
    opts: { everyMs: number; stop?: AbortSignal },
  ): Promise<number> {
    let sent = 0;
    while (!opts.stop?.aborted && !this.#answered()) {
      if (!(await this.write(piece))) break;
      sent++;
      await new Promise((r) => setTimeout(r, opts.everyMs));
    }
    return sent;
  }

  /** Half-closes: the server reads the end of the stream. */
  async closeWrite(): Promise<void> {
    await this.conn.closeWrite().catch(() => {});
  }

  close(): void {
    try {
      this.conn.close();
    } catch {
      // already closed
    }
  }

  /**
   * The final answer, once whole; throws when none came within `ms`. With `take`, its bytes are
   * dropped, so the next call reads the next answer on the connection.
   */
  async answer(opts: { ms?: number; take?: boolean } = {}): Promise<RawBodyAnswer> {
    let parsed: Parsed | null = null;
    await this.#readUntil(() => (parsed = parseAnswer(this.#buffer, { eof: this.#eof })) !== null, {
      ms: opts.ms,
      what: "an answer",
    });
    const { answer, bytes } = parsed!;
    if (opts.take) this.#buffer = this.#buffer.subarray(bytes);
    return answer;
  }

  /**
   * Waits for the server to end the connection: "eof" for its FIN, "reset" when the read failed
   * instead. Throws when it is still open after `ms`.
   */
  async ended(opts: { ms?: number } = {}): Promise<"eof" | "reset"> {
    await this.#readUntil(() => this.#eof, { ms: opts.ms, what: "the end of the connection" });
    return this.#reset ? "reset" : "eof";
  }

  /** Waits until the server sent `text` (e.g. "100 Continue"); throws after `ms`. */
  async received(text: string, opts: { ms?: number } = {}): Promise<void> {
    await this.#readUntil(() => new TextDecoder().decode(this.#buffer).includes(text), {
      ms: opts.ms,
      what: JSON.stringify(text),
    });
  }

  async #readUntil(done: () => boolean, opts: { ms?: number; what: string }): Promise<void> {
    const deadline = Date.now() + (opts.ms ?? 10_000);
    for (;;) {
      if (done()) return;
      if (this.#eof) throw new Error(`the connection closed before ${opts.what}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`${opts.what} did not come within ${opts.ms ?? 10_000} ms`);
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        this.#readMore(),
        new Promise((r) => (timer = setTimeout(r, left))),
      ]);
      clearTimeout(timer);
    }
  }

  #answered(): boolean {
    return parseAnswer(this.#buffer, { eof: this.#eof }) !== null;
  }

  #readMore(): Promise<void> {
    this.#reading ??= (async () => {
      const chunk = new Uint8Array(16 * 1024);
      const n = await this.conn.read(chunk).catch(() => {
        this.#reset = true;
        return null;
      });
      if (n === null) this.#eof = true;
      else {
        const joined = new Uint8Array(this.#buffer.byteLength + n);
        joined.set(this.#buffer);
        joined.set(chunk.subarray(0, n), this.#buffer.byteLength);
        this.#buffer = joined;
      }
      this.#reading = null;
    })();
    return this.#reading;
  }
}

/** An answer, and how many bytes of the stream it took. */
interface Parsed {
  answer: RawBodyAnswer;
  bytes: number;
}

/** A whole final answer at the start of `bytes` (after any 1xx), or null while incomplete. */
function parseAnswer(bytes: Uint8Array, opts: { eof: boolean }): Parsed | null {
  const text = new TextDecoder().decode(bytes);
  const interim: number[] = [];
  let at = 0;
  for (;;) {
    const end = text.indexOf("\r\n\r\n", at);
    if (end < 0) return null;
    const [statusLine = "", ...fields] = text.slice(at, end).split("\r\n");
    const status = Number(statusLine.split(" ")[1]);
    const headers = new Headers();
    for (const field of fields) {
      const colon = field.indexOf(":");
      headers.append(field.slice(0, colon).trim(), field.slice(colon + 1).trim());
    }
    at = end + 4;
    if (status >= 100 && status < 200) {
      interim.push(status);
      continue;
    }
    const length = headers.get("content-length");
    if (length === null) {
      if (!opts.eof) return null;
      return {
        answer: { status, headers, text: text.slice(at), interim },
        bytes: bytes.byteLength,
      };
    }
    const head = encoder.encode(text.slice(0, at)).byteLength;
    const body = bytes.subarray(head);
    if (body.byteLength < Number(length)) return null;
    const answer = new TextDecoder().decode(body.subarray(0, Number(length)));
    return { answer: { status, headers, text: answer, interim }, bytes: head + Number(length) };
  }
}
