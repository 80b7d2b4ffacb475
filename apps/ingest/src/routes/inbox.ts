import { AppError } from "@notify/core";
import { latestInboxItemId, listInboxItems, listInboxItemsAfter, setInboxItemState } from "@notify/db";
import { limitBody, readJson, validate } from "@notify/http";
import type { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import * as v from "valibot";
import type { AuthEnv } from "../auth/middleware.js";
import type { IngestDeps } from "../deps.js";
import { decodeCursor, encodeCursor } from "../inbox/cursor.js";
import { createInboxHub } from "../inbox/hub.js";
import {
  InboxItemSchema,
  InboxItemUpdate,
  InboxPage,
  InboxQuery,
  InboxTokenResponse,
  IssueInboxTokenRequest,
} from "../inbox/schemas.js";
import { type InboxEnv, issueInboxToken, requireInboxToken } from "../inbox/tokens.js";
import { parseUserIdParam } from "../preferences/schemas.js";
import { contract } from "./contract.js";

// NOTIFY wakes a stream at once; the poll only covers a lost LISTEN connection and keeps
// proxies from closing an idle stream (a comment line every time it finds nothing).
const POLL_MS = 5000;
const BATCH = 100;

/** Where the user-facing routes live under /api/v1: they take an inbox token, not an API key. */
export const INBOX_PATH = "/inbox";

const inboxToken = {
  name: "X-Inbox-Token",
  required: true,
  description:
    "The user's token from POST /users/{id}/inbox-tokens; no API key is needed (or used) here, and the token is refused in the URL.",
};

/** What the inbox routes answer the wrong credential with (a token in the URL, an API key, none). */
const INBOX_AUTH_PROBLEMS = ["invalid_request", "unauthenticated"] as const;

/**
 * The in-app gateway: an upstream service issues a per-user token with its API key; the user's
 * client then reads its inbox, sets read/seen/archived, and streams new items over SSE with
 * that token alone (X-Inbox-Token), resuming after Last-Event-ID from the stored inbox.
 */
export function mountInbox(
  v1: Hono<AuthEnv>,
  deps: Pick<IngestDeps, "database" | "lookupKey" | "maxBodyBytes" | "log" | "isStopping" | "preauthThrottle">,
): void {
  const { database } = deps;
  const hub = createInboxHub(database, deps.log);
  const inbox = v1 as unknown as Hono<InboxEnv>;
  const user = requireInboxToken(database, deps.preauthThrottle);

  v1.post(
    "/users/:id/inbox-tokens",
    contract({
      summary: "Issue an inbox token for a user",
      description:
        "For the upstream service to hand to that user's client (an API key names an application, never a user). Needs the inbox scope. The token reads and streams that user's inbox items from this key's client only, until it expires (ttl_seconds, 60-86400, 1 h by default) or the key that minted it is revoked (at the end of a rotation's grace). Only its SHA-256 is stored; expired tokens are purged.",
      tag: "Inbox",
      scope: "inbox",
      body: IssueInboxTokenRequest,
      responses: {
        201: {
          description: "The token, shown once",
          schema: InboxTokenResponse,
          headers: { "Cache-Control": "no-store" },
        },
      },
      problems: ["validation_failed", "malformed_json", "unsupported_media_type", "payload_too_large"],
    }),
    limitBody(deps.maxBodyBytes),
    async (c) => {
      const userId = parseUserIdParam(c.req.param("id"));
      const hasBody =
        (c.req.header("content-length") ?? "0") !== "0" || c.req.header("transfer-encoding") !== undefined;
      const input = validate(IssueInboxTokenRequest, hasBody ? await readJson(c) : {});
      const principal = c.get("principal");
      const issued = await issueInboxToken(database, {
        userId,
        clientId: principal.clientId,
        keyId: principal.keyId,
        ttlSeconds: input.ttl_seconds,
      });
      c.get("log").info({ user_id: userId, expires_at: issued.expires_at }, "inbox token issued");
      c.header("cache-control", "no-store");
      return c.json(issued, 201);
    },
  );

  inbox.get(
    INBOX_PATH,
    contract({
      summary: "List the user's inbox",
      description:
        "Newest first, cursor pagination (limit 20 by default, clamped to 100; next_cursor and has_more). filter: inbox (not archived), unread, archived or all. A cursor from another filter, user or version is a 400.",
      tag: "Inbox",
      scope: null,
      query: InboxQuery,
      headers: [inboxToken],
      responses: { 200: { description: "One page", schema: InboxPage } },
      problems: ["validation_failed", ...INBOX_AUTH_PROBLEMS, "dependency_unavailable"],
    }),
    user,
    async (c) => {
      const owner = c.get("inboxOwner");
      const { userId } = owner;
      const query = validate(InboxQuery, c.req.query());
      const before = query.cursor === undefined ? null : decodeCursor(query.cursor, userId, query.filter);
      const page = await listInboxItems(database, owner, query.filter, query.limit, before);
      const last = page.items.at(-1);
      return c.json({
        data: page.items,
        next_cursor: page.hasMore && last ? encodeCursor(userId, query.filter, Number(last.id)) : null,
        has_more: page.hasMore,
      });
    },
  );

  inbox.patch(
    `${INBOX_PATH}/:itemId`,
    contract({
      summary: "Set an item's seen, read or archived state",
      description: "true sets the state (the first time is kept), false clears it. Another user's item is a 404.",
      tag: "Inbox",
      scope: null,
      body: InboxItemUpdate,
      headers: [inboxToken],
      responses: { 200: { description: "The item", schema: InboxItemSchema } },
      problems: [
        "validation_failed",
        "malformed_json",
        "unsupported_media_type",
        "payload_too_large",
        "not_found",
        ...INBOX_AUTH_PROBLEMS,
        "dependency_unavailable",
      ],
    }),
    limitBody(deps.maxBodyBytes),
    user,
    async (c) => {
      const raw = c.req.param("itemId");
      const id = /^\d{1,18}$/.test(raw) ? Number(raw) : null;
      const change = validate(InboxItemUpdate, await readJson(c));
      // Another user's (or client's) item and a missing one look the same.
      const item = id === null ? null : await setInboxItemState(database, c.get("inboxOwner"), id, change);
      if (item === null) throw new AppError("not_found", "no such inbox item");
      return c.json(item);
    },
  );

  inbox.get(
    `${INBOX_PATH}/stream`,
    contract({
      summary: "Stream new inbox items (Server-Sent Events)",
      description:
        "text/event-stream: a `ready` event, then one `notification` event per new item (id = the item id, data = the item). Reconnect with Last-Event-ID to receive everything stored after it; without it the stream starts at what is new.",
      tag: "Inbox",
      scope: null,
      headers: [
        inboxToken,
        {
          name: "Last-Event-ID",
          required: false,
          description: "Resume after this item id (EventSource sends it on reconnect).",
        },
      ],
      responses: { 200: { description: "An event stream", schema: v.string(), contentType: "text/event-stream" } },
      problems: ["validation_failed", ...INBOX_AUTH_PROBLEMS, "dependency_unavailable"],
    }),
    user,
    async (c) => {
      const owner = c.get("inboxOwner");
      const lastEventId = c.req.header("last-event-id")?.trim();
      if (lastEventId !== undefined && lastEventId !== "" && !/^\d{1,18}$/.test(lastEventId)) {
        throw new AppError("validation_failed", "Last-Event-ID is not an event id of this stream", {
          fields: [{ field: "Last-Event-ID", message: "must be an event id this stream sent" }],
        });
      }
      // A fresh stream starts at what is new; the inbox list has everything before it.
      let after = lastEventId ? Number(lastEventId) : await latestInboxItemId(database, owner);
      const log = c.get("log");
      // nginx would otherwise buffer the stream and hold events back.
      c.header("x-accel-buffering", "no");
      return streamSSE(
        c,
        async (stream) => {
          let pending = false;
          let wakeUp: (() => void) | undefined;
          const wake = () => {
            pending = true;
            wakeUp?.();
          };
          const unsubscribe = hub.subscribe(owner.userId, wake);
          stream.onAbort(wake);
          try {
            await stream.writeSSE({ event: "ready", data: JSON.stringify({ after: String(after) }), retry: 3000 });
            while (!stream.aborted && !deps.isStopping()) {
              pending = false;
              const items = await listInboxItemsAfter(database, owner, after, BATCH);
              for (const item of items) {
                await stream.writeSSE({ id: item.id, event: "notification", data: JSON.stringify(item) });
                after = Number(item.id);
              }
              if (items.length === BATCH || pending) continue;
              if (items.length === 0) await stream.write(": keep-alive\n\n");
              await new Promise<void>((resolve) => {
                const timer = setTimeout(resolve, POLL_MS);
                wakeUp = () => {
                  clearTimeout(timer);
                  resolve();
                };
                if (pending || stream.aborted) wakeUp();
              });
              wakeUp = undefined;
            }
          } finally {
            unsubscribe();
          }
        },
        async (error, stream) => {
          log.warn({ err: error }, "inbox stream ended by an error");
          await stream.close();
        },
      );
    },
  );
}
