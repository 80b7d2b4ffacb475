import createClient from "openapi-fetch";
import { type ConnectionHandlers, openConnection } from "./connection.js";
import { apiError } from "./errors.js";
import type { paths } from "./routes.js";
import { type TokenOption, tokenSource } from "./token.js";
import type {
  InboxCounts,
  InboxFilter,
  InboxItem,
  InboxItemChange,
  InboxPreferences,
  InboxPreferencesUpdate,
  MarkAllAction,
} from "./types.js";

export interface InboxClientOptions {
  /** Origin of the notify ingest API, e.g. "http://127.0.0.1:3000"; the routes' "/api/v1/..." follow it. */
  baseUrl: string;
  /**
   * The user's inbox token, or a function that gets one (from the caller's backend). A function
   * is called once at first, and again after the server refuses its token (401, or the stream's
   * `token_ended`): once per refusal, and the request is sent again once with the new token.
   */
  token: TokenOption;
  /** The fetch to use (globalThis.fetch by default). */
  fetch?: typeof fetch;
  /** How often the list and the counts are read while the stream cannot be had (default 10 s). */
  pollIntervalMs?: number;
  /** The stream's reconnect backoff, full jitter: up to initialMs, doubling, at most maxMs (1 s / 30 s). */
  reconnect?: { initialMs?: number; maxMs?: number };
  /** How long the stream may take to send its `ready` event before the attempt counts as failed (10 s). */
  openTimeoutMs?: number;
  /**
   * How long an open stream may send nothing before it counts as dropped (45 s; the server
   * writes a comment every 15 s, INBOX_KEEPALIVE_SECONDS).
   */
  idleTimeoutMs?: number;
}

export interface InboxPage {
  items: InboxItem[];
  /** For the next page (`list({ cursor })`); null on the last one. */
  nextCursor: string | null;
  hasMore: boolean;
}

export interface InboxClient {
  /** A page of the user's inbox, newest first (20 items by default, at most 100). */
  list(query?: { filter?: InboxFilter; limit?: number; cursor?: string }): Promise<InboxPage>;
  counts(): Promise<InboxCounts>;
  /** Sets (true) or clears (false) an item's states; the server's item in answer. */
  update(id: string, change: InboxItemChange): Promise<InboxItem>;
  /** Sets a state on every item, or on every item up to `beforeId` (the newest the user has seen listed). */
  markAll(action: MarkAllAction, options?: { beforeId?: string }): Promise<InboxCounts>;
  preferences(): Promise<InboxPreferences>;
  updatePreferences(patch: InboxPreferencesUpdate): Promise<InboxPreferences>;
  /**
   * The live connection: new items (oldest first, each once), counts as they change, and the
   * connection's state. Resumes after `lastEventId` (an item id) when given; otherwise starts at
   * what is new. Returns the function that closes it.
   */
  connect(handlers: ConnectionHandlers, options?: { lastEventId?: string }): () => void;
}

/** The stream's route and headers, checked against the generated types like the other routes'. */
const STREAM_PATH = "/api/v1/inbox/stream" satisfies keyof paths;
type StreamHeaders = paths[typeof STREAM_PATH]["get"]["parameters"]["header"];

/** What openapi-fetch answers: the parsed body, or the error body, and the response. */
interface Answer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

export function createInboxClient(options: InboxClientOptions): InboxClient {
  const tokens = tokenSource(options.token);
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  const fetcher = (request: Request) => (options.fetch ?? globalThis.fetch)(request);
  const api = createClient<paths>({ baseUrl, fetch: fetcher });
  const header = (token: string) => ({ "X-Inbox-Token": token });

  /** Sends with the current token, once more with a new one after a 401; the body, or an InboxApiError. */
  const call = async <T>(send: (token: string) => Promise<Answer<T>>): Promise<T> => {
    const token = await tokens.current();
    let answer = await send(token);
    if (answer.response.status === 401 && tokens.renewable) {
      const fresh = await tokens.refresh(token);
      if (fresh !== null) answer = await send(fresh);
    }
    if (!answer.response.ok) throw apiError(answer.response, answer.error);
    return answer.data as T;
  };

  const list: InboxClient["list"] = async (query = {}) => {
    const page = await call((token) =>
      api.GET("/api/v1/inbox", {
        params: {
          header: header(token),
          query: {
            ...(query.filter === undefined ? {} : { filter: query.filter }),
            ...(query.limit === undefined ? {} : { limit: String(query.limit) }),
            ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
          },
        },
      }),
    );
    return { items: page.data, nextCursor: page.next_cursor, hasMore: page.has_more };
  };

  const counts: InboxClient["counts"] = () =>
    call((token) => api.GET("/api/v1/inbox/counts", { params: { header: header(token) } }));

  return {
    list,
    counts,
    update: (id, change) =>
      call((token) =>
        api.PATCH("/api/v1/inbox/{itemId}", {
          params: { header: header(token), path: { itemId: id } },
          body: change,
        }),
      ),
    markAll: (action, markOptions = {}) =>
      call((token) =>
        api.POST("/api/v1/inbox/mark-all", {
          params: { header: header(token) },
          body: { action, ...(markOptions.beforeId === undefined ? {} : { before_id: markOptions.beforeId }) },
        }),
      ),
    preferences: () => call((token) => api.GET("/api/v1/inbox/preferences", { params: { header: header(token) } })),
    updatePreferences: (patch) =>
      call((token) => api.PATCH("/api/v1/inbox/preferences", { params: { header: header(token) }, body: patch })),
    connect: (handlers, connectOptions = {}) =>
      openConnection(
        {
          tokens,
          // Plain fetch, not openapi-fetch: the body is read as it arrives, and nothing is parsed.
          openStream: (token, lastEventId, signal) =>
            fetcher(
              new Request(`${baseUrl}${STREAM_PATH}`, {
                headers: {
                  ...(header(token) satisfies StreamHeaders),
                  ...(lastEventId === undefined
                    ? {}
                    : ({ "Last-Event-ID": lastEventId } satisfies Partial<StreamHeaders>)),
                  accept: "text/event-stream",
                },
                signal,
              }),
            ),
          list: (query) => list(query),
          counts,
        },
        {
          pollIntervalMs: options.pollIntervalMs ?? 10_000,
          initialMs: options.reconnect?.initialMs ?? 1000,
          maxMs: options.reconnect?.maxMs ?? 30_000,
          openTimeoutMs: options.openTimeoutMs ?? 10_000,
          idleTimeoutMs: options.idleTimeoutMs ?? 45_000,
        },
        handlers,
        connectOptions.lastEventId,
      ),
  };
}
