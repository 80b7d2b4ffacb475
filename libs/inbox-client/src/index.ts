// The headless client of the notify in-app inbox: typed requests (from the ingest app's OpenAPI
// document), the live connection (stream with resume, polling where the stream is blocked) and
// a feed with optimistic marks. No framework and no Node.js API: browsers and Node.js 20+.
export { createInboxClient, type InboxClient, type InboxClientOptions, type InboxPage } from "./client.js";
export type { ConnectionHandlers } from "./connection.js";
export { InboxApiError, type Problem } from "./errors.js";
export { createInboxFeed, type InboxFeed, type InboxFeedState } from "./feed.js";
export { compareIds } from "./ids.js";
export { createSseDecoder, createSseParser, type SseEvent, type SseHandlers } from "./sse.js";
export type { TokenOption } from "./token.js";
export type {
  ConnectionState,
  InboxCounts,
  InboxFilter,
  InboxItem,
  InboxItemChange,
  InboxPreferences,
  InboxPreferencesUpdate,
  MarkAllAction,
} from "./types.js";
