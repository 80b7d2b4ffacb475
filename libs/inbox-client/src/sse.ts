/** One dispatched server-sent event, as the HTML standard's EventSource would see it. */
export interface SseEvent {
  /** The `event:` field; "message" when the block has none. */
  event: string;
  /** The `data:` lines, joined with "\n". */
  data: string;
  /** The last event ID buffer: the latest `id:` field of the stream so far (it carries over blocks). */
  id: string;
}

export interface SseHandlers {
  onEvent(event: SseEvent): void;
  /** A comment line (":" and what follows, without the colon), e.g. the server's keep-alive. */
  onComment?(text: string): void;
}

/** The longest line or event the parser buffers: a stream that sends more is broken. */
export const MAX_SSE_BUFFER = 1024 * 1024;

/**
 * The event-stream interpretation of the HTML standard (9.2.6) over decoded text fed in chunks
 * of any size: lines end with CRLF, LF or CR (a CR at the end of a chunk and an LF at the start
 * of the next are one line end), a blank line dispatches, a block without data dispatches
 * nothing. Throws when a line or an event's data grows beyond MAX_SSE_BUFFER.
 */
export function createSseParser(handlers: SseHandlers): { feed(text: string): void } {
  let buffer = "";
  let skipLineFeed = false;
  let type = "";
  let data = "";
  let hasData = false;
  let lastId = "";

  const line = (text: string) => {
    if (text === "") {
      if (hasData) handlers.onEvent({ event: type === "" ? "message" : type, data, id: lastId });
      type = "";
      data = "";
      hasData = false;
      return;
    }
    if (text.startsWith(":")) {
      handlers.onComment?.(text.slice(1).replace(/^ /, ""));
      return;
    }
    const colon = text.indexOf(":");
    const field = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? "" : text.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") type = value;
    else if (field === "data") {
      data = hasData ? `${data}\n${value}` : value;
      hasData = true;
      if (data.length > MAX_SSE_BUFFER) throw new Error("an event's data is longer than the parser holds");
    } else if (field === "id" && !value.includes("\0")) lastId = value;
    // retry: this client keeps its own backoff; other fields are ignored, as the standard says.
  };

  return {
    feed(text: string) {
      if (text === "") return;
      let chunk = text;
      if (skipLineFeed) {
        skipLineFeed = false;
        if (chunk.startsWith("\n")) chunk = chunk.slice(1);
      }
      buffer += chunk;
      let start = 0;
      for (;;) {
        const cr = buffer.indexOf("\r", start);
        const lf = buffer.indexOf("\n", start);
        const end = cr === -1 ? lf : lf === -1 ? cr : Math.min(cr, lf);
        if (end === -1) break;
        let next = end + 1;
        if (buffer[end] === "\r") {
          if (next === buffer.length) skipLineFeed = true;
          else if (buffer[next] === "\n") next += 1;
        }
        line(buffer.slice(start, end));
        start = next;
      }
      buffer = buffer.slice(start);
      if (buffer.length > MAX_SSE_BUFFER) throw new Error("a line of the event stream is longer than the parser holds");
    },
  };
}

/**
 * Bytes of a text/event-stream in chunks of any size (a UTF-8 character may be split between
 * two) to events: a streaming UTF-8 decoder (which drops a leading byte order mark) in front of
 * the parser.
 */
export function createSseDecoder(handlers: SseHandlers): { push(bytes: Uint8Array): void } {
  const decoder = new TextDecoder("utf-8");
  const parser = createSseParser(handlers);
  return {
    push(bytes: Uint8Array) {
      parser.feed(decoder.decode(bytes, { stream: true }));
    },
  };
}
