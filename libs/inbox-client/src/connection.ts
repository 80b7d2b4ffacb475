import { apiError, InboxApiError } from "./errors.js";
import { compareIds } from "./ids.js";
import { createSseDecoder, type SseEvent } from "./sse.js";
import type { TokenSource } from "./token.js";
import type { ConnectionState, InboxCounts, InboxItem } from "./types.js";

export interface ConnectionHandlers {
  onItem?(item: InboxItem): void;
  onCounts?(counts: InboxCounts): void;
  onState?(state: ConnectionState, error?: Error): void;
}

/** What the connection needs of the client: its requests, its token and its timers. */
export interface ConnectionIo {
  tokens: TokenSource;
  /** GET /inbox/stream with this token, resuming after `lastEventId` when given. */
  openStream(token: string, lastEventId: string | undefined, signal: AbortSignal): Promise<Response>;
  list(query: { filter: "all"; limit: number; cursor?: string }): Promise<{
    items: InboxItem[];
    nextCursor: string | null;
    hasMore: boolean;
  }>;
  counts(): Promise<InboxCounts>;
}

export interface ConnectionSettings {
  pollIntervalMs: number;
  initialMs: number;
  maxMs: number;
  openTimeoutMs: number;
  idleTimeoutMs: number;
}

/** Stream attempts in a row that never reach `ready`, after which the list is polled meanwhile. */
export const FALLBACK_AFTER_FAILURES = 2;
/**
 * How long a stream must have stayed open for its end to restart the backoff: one that ends
 * sooner (a server shutting down, a proxy cutting streams short) counts as a failed attempt.
 */
export const STABLE_STREAM_MS = 5000;
/** The page size polling reads the newest items with (the list's largest). */
const POLL_PAGE = 100;

type Outcome =
  /** The stream was open (for `lasted` ms) and ended (the server stopped, the network dropped, it fell silent). */
  | { kind: "dropped"; lasted: number; error: Error }
  /** The stream could not be opened, or ended before `ready`. */
  | { kind: "failed"; error: Error; retryAfterSeconds?: number }
  /** The server sent `token_ended`; a token function gave a new token to resume with. */
  | { kind: "renewed" }
  /** Nothing to retry: the token is refused for good, or the request is wrong. */
  | { kind: "fatal"; error: Error };

const isEventStream = (response: Response) => /^text\/event-stream\b/i.test(response.headers.get("content-type") ?? "");
const isProblem = (response: Response) =>
  /^application\/problem\+json\b/i.test(response.headers.get("content-type") ?? "");

/** Full jitter: a uniformly random wait up to the exponential step, capped. */
export const fullJitter = (attempt: number, initialMs: number, maxMs: number) =>
  Math.random() * Math.min(maxMs, initialMs * 2 ** Math.max(0, attempt - 1));

/** A handler's exception is reported, and never breaks the connection that called it. */
function guarded<A extends unknown[]>(fn: ((...args: A) => void) | undefined, ...args: A): void {
  try {
    fn?.(...args);
  } catch (error) {
    const report = (globalThis as { reportError?: (error: unknown) => void }).reportError;
    if (report) report(error);
    else console.error(error);
  }
}

/**
 * The live connection behind InboxClient.connect: the stream, reopened with backoff and
 * Last-Event-ID, and polling of the list while the stream cannot be had. Every item is passed on
 * once, oldest first: none at or before the newest id passed on already.
 */
export function openConnection(
  io: ConnectionIo,
  settings: ConnectionSettings,
  handlers: ConnectionHandlers,
  lastEventId: string | undefined,
): () => void {
  let closed = false;
  let state: ConnectionState | undefined;
  /** The newest item passed on (or where the stream started): what the next stream resumes after. */
  let lastId = lastEventId === "" ? undefined : lastEventId;
  /** Ends the current attempt (its request or its stream). */
  let abort: { abort(): void } | undefined;
  let endWait: (() => void) | undefined;
  let polling = false;
  let pollTimer: ReturnType<typeof setTimeout> | undefined;
  /** Whether the latest poll answered: then the API is up and only the stream is out of reach. */
  let pollsAnswer = false;

  let stateError: Error | undefined;
  const report = (next: ConnectionState, error?: Error) => {
    if (closed) return;
    if (next === state && error === undefined && stateError === undefined) return;
    state = next;
    stateError = error;
    guarded(handlers.onState, next, error);
  };

  const deliver = (item: InboxItem) => {
    if (lastId !== undefined && compareIds(item.id, lastId) <= 0) return;
    lastId = item.id;
    guarded(handlers.onItem, item);
  };

  const wait = (ms: number) =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        if (endWait === done) endWait = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      endWait = done;
    });

  const poll = async () => {
    pollTimer = undefined;
    // ±20 %: clients that fell back together (a proxy, an outage) do not poll in step.
    let delay = settings.pollIntervalMs * (0.8 + Math.random() * 0.4);
    const since = lastId;
    try {
      const fresh: InboxItem[] = [];
      let cursor: string | undefined;
      pages: for (;;) {
        const page = await io.list({ filter: "all", limit: POLL_PAGE, ...(cursor === undefined ? {} : { cursor }) });
        for (const item of page.items) {
          if (since !== undefined && compareIds(item.id, since) <= 0) break pages;
          fresh.push(item);
        }
        // Without an id to start from, the newest item is where "new" starts.
        if (since === undefined || !page.hasMore || page.nextCursor === null) break;
        cursor = page.nextCursor;
      }
      if (!polling) return;
      if (since === undefined) lastId ??= fresh[0]?.id ?? "0";
      else for (const item of fresh.reverse()) deliver(item);
      const counts = await io.counts();
      if (!polling) return;
      guarded(handlers.onCounts, counts);
      const recovered = !pollsAnswer;
      pollsAnswer = true;
      report("polling");
      // The API answers again (after an outage, say): the stream is tried at once.
      if (recovered) endWait?.();
    } catch (error) {
      pollsAnswer = false;
      if (!polling) return;
      const retryAfter = error instanceof InboxApiError ? error.retryAfterSeconds : undefined;
      if (retryAfter !== undefined) delay = Math.max(delay, retryAfter * 1000);
      report("polling", error instanceof Error ? error : new Error(String(error)));
    }
    if (polling) pollTimer = setTimeout(poll, delay);
  };

  const startPolling = (error: Error) => {
    if (polling) return;
    polling = true;
    pollsAnswer = false;
    report("polling", error);
    pollTimer = setTimeout(poll, 0);
  };
  const stopPolling = () => {
    polling = false;
    if (pollTimer !== undefined) clearTimeout(pollTimer);
    pollTimer = undefined;
  };

  /** One stream: opened, read to its end. */
  const attempt = async (): Promise<Outcome> => {
    const controller = new AbortController();
    let opened = false;
    let openedAt = 0;
    let timedOut = false;
    let ended: string | undefined;
    // Until `ready`, the open timeout runs (from the request on: a proxy may hold the headers
    // too); after it, the idle timeout, restarted by every chunk (the keep-alive comments).
    let watchdog: ReturnType<typeof setTimeout> | undefined;
    let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
    // Both: an abort alone does not always settle a pending read of a body already being read.
    const stop = () => {
      reader?.cancel().catch(() => undefined);
      controller.abort();
    };
    abort = { abort: stop };
    const watch = () => {
      if (watchdog !== undefined) clearTimeout(watchdog);
      watchdog = setTimeout(
        () => {
          timedOut = true;
          stop();
        },
        opened ? settings.idleTimeoutMs : settings.openTimeoutMs,
      );
    };
    const silence = () =>
      new Error(
        opened
          ? `the inbox stream was silent for ${settings.idleTimeoutMs} ms`
          : `the inbox stream sent no ready event within ${settings.openTimeoutMs} ms`,
      );
    const asError = (error: unknown) =>
      timedOut ? silence() : error instanceof Error ? error : new Error(String(error));

    let token: string | undefined;
    let response: Response;
    try {
      watch();
      token = await io.tokens.current();
      response = await io.openStream(token, lastId, controller.signal);
      if (response.status === 401 && io.tokens.renewable) {
        await response.body?.cancel().catch(() => undefined);
        const fresh = await io.tokens.refresh(token);
        if (fresh !== null) {
          token = fresh;
          response = await io.openStream(token, lastId, controller.signal);
        }
      }
      if (!response.ok || !isEventStream(response)) {
        const body = await response.text();
        let parsed: unknown = body;
        try {
          parsed = JSON.parse(body);
        } catch {}
        const error = apiError(response, parsed);
        // The service itself refusing the token or the request: retrying cannot help.
        if (response.status === 401 || (isProblem(response) && [400, 403, 410].includes(response.status))) {
          return { kind: "fatal", error };
        }
        return {
          kind: "failed",
          error,
          ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds }),
        };
      }
    } catch (error) {
      if (watchdog !== undefined) clearTimeout(watchdog);
      return { kind: "failed", error: asError(error) };
    }

    const onEvent = (event: SseEvent) => {
      if (event.event === "ready") {
        opened = true;
        openedAt = Date.now();
        stopPolling();
        const after = (JSON.parse(event.data) as { after?: unknown }).after;
        if (lastId === undefined && typeof after === "string") lastId = after;
        report("open");
      } else if (event.event === "notification") {
        deliver(JSON.parse(event.data) as InboxItem);
      } else if (event.event === "counts") {
        guarded(handlers.onCounts, JSON.parse(event.data) as InboxCounts);
      } else if (event.event === "token_ended") {
        ended = String((JSON.parse(event.data) as { reason?: unknown }).reason ?? "ended");
      }
    };
    const decoder = createSseDecoder({ onEvent });
    let failure: Error | undefined;
    try {
      if (response.body === null) throw new Error("the inbox stream has no body");
      reader = response.body.getReader();
      while (ended === undefined) {
        const { done, value } = await reader.read();
        if (done) break;
        watch();
        decoder.push(value);
      }
    } catch (error) {
      failure = asError(error);
    } finally {
      if (watchdog !== undefined) clearTimeout(watchdog);
      stop();
    }
    if (ended !== undefined) {
      const error = new InboxApiError(401, {
        title: "Inbox token ended",
        detail: `the inbox token stopped working (${ended})`,
        code: "token_ended",
        reason: ended,
      });
      if (!io.tokens.renewable) return { kind: "fatal", error };
      try {
        const fresh = await io.tokens.refresh(token);
        return fresh === null ? { kind: "fatal", error } : { kind: "renewed" };
      } catch (cause) {
        return { kind: "failed", error: cause instanceof Error ? cause : error };
      }
    }
    if (opened) {
      return { kind: "dropped", lasted: Date.now() - openedAt, error: failure ?? new Error("the inbox stream ended") };
    }
    return { kind: "failed", error: failure ?? new Error("the inbox stream ended before its ready event") };
  };

  const run = async () => {
    /** Attempts in a row that failed or ended soon: how far the backoff has grown. */
    let failures = 0;
    /** Attempts in a row that never reached `ready`: the stream may be blocked on the way. */
    let unopened = 0;
    while (!closed) {
      if (!polling) report("connecting");
      const outcome = await attempt();
      if (closed) return;
      let delay: number;
      if (outcome.kind === "fatal") {
        report("closed", outcome.error);
        close();
        return;
      }
      if (outcome.kind === "renewed") {
        failures = 0;
        unopened = 0;
        continue;
      }
      unopened = outcome.kind === "dropped" ? 0 : unopened + 1;
      if (outcome.kind === "dropped" && outcome.lasted >= STABLE_STREAM_MS) {
        failures = 0;
        delay = fullJitter(1, settings.initialMs, settings.maxMs);
      } else {
        failures += 1;
        if (unopened >= FALLBACK_AFTER_FAILURES) startPolling(outcome.error);
        delay =
          polling && pollsAnswer
            ? fullJitter(Number.POSITIVE_INFINITY, settings.initialMs, settings.maxMs)
            : fullJitter(failures, settings.initialMs, settings.maxMs);
        if (outcome.kind === "failed" && outcome.retryAfterSeconds !== undefined) {
          delay = Math.max(delay, outcome.retryAfterSeconds * 1000);
        }
      }
      await wait(delay);
    }
  };

  const close = () => {
    if (closed) return;
    report("closed");
    closed = true;
    stopPolling();
    abort?.abort();
    endWait?.();
  };

  void run();
  return close;
}
