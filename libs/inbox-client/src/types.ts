import type { paths } from "./routes.js";

// The client's types, each read from the routes' generated types: a change to a route's contract
// changes them (or fails the build), never silently.

type JsonAnswer<Operation> = Operation extends { responses: { 200: { content: { "application/json": infer T } } } }
  ? T
  : never;
type JsonBody<Operation> = Operation extends { requestBody?: { content: { "application/json": infer T } } } ? T : never;

/** One item of a user's inbox, as the list, a change and the stream give it. */
export type InboxItem = JsonAnswer<paths["/api/v1/inbox/{itemId}"]["patch"]>;

/** Which items a list holds: inbox (not archived), unread (and not archived), archived, or all. */
export type InboxFilter = NonNullable<NonNullable<paths["/api/v1/inbox"]["get"]["parameters"]["query"]>["filter"]>;

/** The changes PATCH /inbox/{itemId} takes: true sets a state (its first time is kept), false clears it. */
export type InboxItemChange = JsonBody<paths["/api/v1/inbox/{itemId}"]["patch"]>;

/** How many of the user's items are unread, unseen, and in all. */
export type InboxCounts = JsonAnswer<paths["/api/v1/inbox/counts"]["get"]>;

/** What a mark-all sets on every item up to `before_id`. */
export type MarkAllAction = JsonBody<paths["/api/v1/inbox/mark-all"]["post"]>["action"];

/** The preferences the user may see and change with an inbox token. */
export type InboxPreferences = JsonAnswer<paths["/api/v1/inbox/preferences"]["get"]>;

/** A change of the user's preferences: the fields given are replaced, the others kept. */
export type InboxPreferencesUpdate = JsonBody<paths["/api/v1/inbox/preferences"]["patch"]>;

/**
 * The live connection: opening the stream (and between attempts), streaming, polling the list
 * because the stream cannot be had (it is still tried, at the longest backoff), or closed.
 */
export type ConnectionState = "connecting" | "open" | "polling" | "closed";
