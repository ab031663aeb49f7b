/** One server-sent event. */
export interface SseEvent {
  event: string;
  data: string;
}

/**
 * An incremental SSE parser for streamed text (the page reads the live feed with fetch, which
 * hands over arbitrary chunks). Comments are skipped; `data` lines of one event are joined.
 */
export function createSseParser(onEvent: (event: SseEvent) => void): (chunk: string) => void {
  let buffer = "";
  let event = "";
  let data: string[] = [];
  const line = (text: string) => {
    if (text === "") {
      if (data.length > 0) onEvent({ event: event || "message", data: data.join("\n") });
      event = "";
      data = [];
      return;
    }
    if (text.startsWith(":")) return;
    const colon = text.indexOf(":");
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? "" : text.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  };
  return (chunk) => {
    buffer += chunk;
    for (;;) {
      const end = buffer.search(/\r\n|\r|\n/);
      if (end < 0) return;
      // A lone \r at the end of a chunk may be the first half of \r\n: wait for the next one.
      if (buffer[end] === "\r" && end === buffer.length - 1) return;
      const size = buffer.startsWith("\r\n", end) ? 2 : 1;
      line(buffer.slice(0, end));
      buffer = buffer.slice(end + size);
    }
  };
}
