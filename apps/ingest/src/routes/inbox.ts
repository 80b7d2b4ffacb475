import { announceInboxTokensRevoked } from "@notify/bus";
import { AppError, isUuid, validate } from "@notify/core";
import {
  countInboxItems,
  type InboxCounts,
  type InboxTokenRevocation,
  insertInboxTokenRevocation,
  latestInboxItemId,
  listInboxItems,
  listInboxItemsAfter,
  loadCredentialKeys,
  markAllInboxItems,
  setInboxItemState,
} from "@notify/db";
import { limitBody, readJson } from "@notify/http";
import type { Context, Hono } from "hono";
import { streamSSE } from "hono/streaming";
import * as v from "valibot";
import type { AuthEnv } from "../auth/middleware.js";
import type { IngestDeps } from "../deps.js";
import { decodeCursor, encodeCursor } from "../inbox/cursor.js";
import { createInboxHub, type InboxChange } from "../inbox/hub.js";
import { changeInboxPreferences, type InboxPreferencesAnswer, readInboxPreferences } from "../inbox/preferences.js";
import { createInboxRevocations, mayNameLiveToken, revocationExpiresMs } from "../inbox/revocations.js";
import {
  InboxCountsSchema,
  InboxItemSchema,
  InboxItemUpdate,
  InboxMarkAllRequest,
  InboxPage,
  InboxPreferencesSchema,
  InboxPreferencesUpdate,
  InboxQuery,
  InboxTokenResponse,
  IssueInboxTokenRequest,
} from "../inbox/schemas.js";
import { DEFAULT_INBOX_SETTINGS, REVOCATION_CAP_RETRY_SECONDS } from "../inbox/settings.js";
import { createInboxStreams, type StreamEnd } from "../inbox/streams.js";
import { type InboxEnv, issueInboxToken, requireInboxToken } from "../inbox/tokens.js";
import { parseUserIdParam } from "../preferences/schemas.js";
import { spreadChange, spreadProfileChange } from "./announce.js";
import { contract } from "./contract.js";

const BATCH = 100;

/** Where the user-facing routes live under /api/v1: they take an inbox token, not an API key. */
export const INBOX_PATH = "/inbox";

const inboxToken = {
  name: "X-Inbox-Token",
  required: true,
  description:
    "The user's token from POST /users/{id}/inbox-tokens; no API key is needed (or used) here, and the token is refused in the URL.",
};

/**
 * What the inbox routes answer the wrong credential with (a token in the URL, an API key, none),
 * and a token or user past its rate limit.
 */
const INBOX_AUTH_PROBLEMS = ["invalid_request", "unauthenticated", "rate_limited"] as const;

/** What a route that takes a JSON body from the user's client may answer besides. */
const INBOX_BODY_PROBLEMS = [
  "validation_failed",
  "malformed_json",
  "unsupported_media_type",
  "payload_too_large",
] as const;

const sameCounts = (a: InboxCounts | undefined, b: InboxCounts) =>
  a !== undefined && a.unread === b.unread && a.unseen === b.unseen && a.total === b.total;

/** The reasons a stream's `token_ended` event gives (a stopping process ends streams without one). */
const ENDED: Record<Exclude<StreamEnd, "stopping">, string> = {
  expired: "expired",
  revoked: "revoked",
  key_revoked: "key_revoked",
};

/**
 * The in-app gateway: an upstream service issues a per-user token with its API key (and revokes
 * them); the user's client then reads its inbox, sets read/seen/archived, and streams new items
 * over SSE with that token alone (X-Inbox-Token), resuming after Last-Event-ID from the stored
 * inbox. The inbox's reads use their own pool (`inboxDatabase`), never the accept path's.
 */
export function mountInbox(v1: Hono<AuthEnv>, deps: IngestDeps): void {
  const { database } = deps;
  const inboxDatabase = deps.inboxDatabase ?? database;
  const settings = { ...DEFAULT_INBOX_SETTINGS, ...deps.inbox };
  const critical = deps.criticalCategories ?? [];
  const revocations = deps.inboxRevocations ?? createInboxRevocations(inboxDatabase, { log: deps.log });
  const hub = createInboxHub(inboxDatabase, deps.log, { pollMs: settings.pollMs });
  const streams = createInboxStreams({
    settings,
    lookupKey: deps.lookupKey,
    revocations,
    isStopping: deps.isStopping,
    log: deps.log,
  });
  const inbox = v1 as unknown as Hono<InboxEnv>;
  const user = requireInboxToken({
    database,
    inboxDatabase,
    lookupKey: deps.lookupKey,
    revocations,
    settings,
    throttle: deps.preauthThrottle,
  });

  v1.post(
    "/users/:id/inbox-tokens",
    contract({
      summary: "Issue an inbox token for a user",
      description:
        "For the upstream service to hand to that user's client (an API key names an application, never a user). Needs the inbox scope. The token reads and streams that user's inbox items from this key's client only, until it expires (ttl_seconds, 60-86400, 1 h by default), it is revoked (DELETE /users/{id}/inbox-tokens, or /{tokenId} with its token_id), or the key that minted it is revoked (at the end of a rotation's grace). It is self-contained and signed with the deployment's secret: nothing is stored, and every instance checks it without a lookup.",
      tag: "Inbox",
      scope: "inbox",
      body: IssueInboxTokenRequest,
      responses: {
        201: {
          description: "The token, shown once, and its id",
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
      const issued = issueInboxToken(await loadCredentialKeys(database), {
        userId,
        clientId: principal.clientId,
        keyId: principal.keyId,
        ttlSeconds: input.ttl_seconds,
      });
      c.get("log").info(
        { user_id: userId, token_id: issued.token_id, expires_at: issued.expires_at },
        "inbox token issued",
      );
      c.header("cache-control", "no-store");
      return c.json(issued, 201);
    },
  );

  const capReached = () =>
    new AppError(
      "rate_limited",
      `this client holds ${settings.revocationsPerClient} inbox token revocations in force, as many as one client may; each ends when the tokens it covers have expired`,
      { context: { retryAfterSeconds: REVOCATION_CAP_RETRY_SECONDS } },
    );

  /**
   * Stores the revocation, applies it here (ending the streams it covers) and announces it to
   * every instance. One that would add a row beyond the client's cap is refused: here first, from
   * what this instance holds, and by the client's count in Postgres, which every instance shares.
   */
  const revoke = async (c: Context<AuthEnv>, revocation: InboxTokenRevocation) => {
    const { clientId } = revocation;
    if (!revocations.holds(revocation) && revocations.heldBy(clientId) >= settings.revocationsPerClient) {
      throw capReached();
    }
    const stored = await insertInboxTokenRevocation(
      database,
      { ...revocation, expiresAt: new Date(revocationExpiresMs(revocation)) },
      settings.revocationsPerClient,
    );
    if (stored === "full") throw capReached();
    await spreadChange(c, {
      forget: () => revocations.add(revocation),
      announce: () =>
        announceInboxTokensRevoked(deps.bus, {
          inbox_user_id: revocation.userId,
          client_id: revocation.clientId,
          token_id: revocation.tokenId,
          revoked_at: revocation.revokedAt.toISOString(),
        }),
      fields: { user_id: revocation.userId, ...(revocation.tokenId === null ? {} : { token_id: revocation.tokenId }) },
      within: "INBOX_REVOCATION_REFRESH_SECONDS",
    });
    c.get("log").info({ user_id: revocation.userId, token_id: revocation.tokenId ?? "all" }, "inbox tokens revoked");
    return c.body(null, 204);
  };

  v1.delete(
    "/users/:id/inbox-tokens",
    contract({
      summary: "Revoke every inbox token of a user",
      description:
        "Every token of the user minted by this key's client and issued up to now stops working at once, on every instance, and the user's open streams end with a `token_ended` event. Tokens minted afterwards work. Another client's tokens of the same user id are not touched. Each client holds at most INBOX_REVOCATIONS_PER_CLIENT revocations in force (one per user it revoked all of, one per token), each until the tokens it covers have expired: one more is a 429 with Retry-After.",
      tag: "Inbox",
      scope: "inbox",
      responses: { 204: { description: "Revoked" } },
      problems: ["validation_failed"],
    }),
    async (c) => {
      const userId = parseUserIdParam(c.req.param("id"));
      return revoke(c, { clientId: c.get("principal").clientId, userId, tokenId: null, revokedAt: new Date() });
    },
  );

  v1.delete(
    "/users/:id/inbox-tokens/:tokenId",
    contract({
      summary: "Revoke one inbox token",
      description:
        "The token with this token_id (from the answer that minted it), of this user and this key's client, stops working at once, on every instance, and its open streams end with a `token_ended` event. Tokens are not stored, so revoking an id no token of this user and client has is a 204 as well, and so is an id no working token can have (not a UUIDv7 issued within the longest lifetime, a day, before now), for which nothing is stored; an id that is not a UUID is a 404. Each client holds at most INBOX_REVOCATIONS_PER_CLIENT revocations in force, each until its token's latest expiry: one more is a 429 with Retry-After.",
      tag: "Inbox",
      scope: "inbox",
      responses: { 204: { description: "Revoked" } },
      problems: ["validation_failed", "not_found"],
    }),
    async (c) => {
      const userId = parseUserIdParam(c.req.param("id"));
      const tokenId = c.req.param("tokenId");
      if (!isUuid(tokenId)) throw new AppError("not_found", "no inbox token has this id");
      const revokedAt = new Date();
      // No working token has this id (it would have expired, or is not yet issued): the answer
      // is the same 204, and nothing is stored or held.
      if (!mayNameLiveToken(tokenId, revokedAt.getTime())) return c.body(null, 204);
      return revoke(c, { clientId: c.get("principal").clientId, userId, tokenId: tokenId.toLowerCase(), revokedAt });
    },
  );

  inbox.get(
    INBOX_PATH,
    contract({
      summary: "List the user's inbox",
      description:
        "Newest first, cursor pagination (limit 20 by default, clamped to 100; next_cursor and has_more). filter: inbox (not archived), unread, archived or all. A cursor from another filter, user or version is a 400. Each token and each user has a rate limit (429 with Retry-After and the RateLimit headers).",
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
      const page = await listInboxItems(inboxDatabase, owner, query.filter, query.limit, before);
      const last = page.items.at(-1);
      return c.json({
        data: page.items,
        next_cursor: page.hasMore && last ? encodeCursor(userId, query.filter, Number(last.id)) : null,
        has_more: page.hasMore,
      });
    },
  );

  inbox.get(
    `${INBOX_PATH}/counts`,
    contract({
      summary: "Count the user's inbox",
      description:
        "total: items not archived; unread: of those, not read; unseen: of those, not seen. The stream sends the same as a `counts` event whenever they change. Each token and each user has a rate limit (429 with Retry-After and the RateLimit headers).",
      tag: "Inbox",
      scope: null,
      headers: [inboxToken],
      responses: { 200: { description: "The counts", schema: InboxCountsSchema } },
      problems: [...INBOX_AUTH_PROBLEMS, "dependency_unavailable"],
    }),
    user,
    async (c) => c.json(await countInboxItems(inboxDatabase, c.get("inboxOwner"))),
  );

  inbox.post(
    `${INBOX_PATH}/mark-all`,
    contract({
      summary: "Mark every item of the inbox read, seen or archived",
      description:
        "One statement over the items not archived (the inbox view); an item already in that state keeps its first time. before_id bounds it to the items up to and including that id, so an item stored after the user's last look is left as it is. Answers the counts after it; the user's streams get a `counts` event. Each token and each user has a rate limit (429 with Retry-After and the RateLimit headers).",
      tag: "Inbox",
      scope: null,
      body: InboxMarkAllRequest,
      headers: [inboxToken],
      responses: { 200: { description: "The counts after the change", schema: InboxCountsSchema } },
      problems: [...INBOX_BODY_PROBLEMS, ...INBOX_AUTH_PROBLEMS, "dependency_unavailable"],
    }),
    limitBody(deps.maxBodyBytes),
    user,
    async (c) => {
      const owner = c.get("inboxOwner");
      const input = validate(InboxMarkAllRequest, await readJson(c));
      const upTo = input.before_id === undefined ? null : Number(input.before_id);
      const changed = await markAllInboxItems(inboxDatabase, owner, input.action, upTo);
      c.get("log").info({ action: input.action, changed }, "inbox marked");
      return c.json(await countInboxItems(inboxDatabase, owner));
    },
  );

  const preferencesAnswer = (c: Context, answer: InboxPreferencesAnswer) => {
    if (answer.updatedAt) c.header("last-modified", answer.updatedAt.toUTCString());
    return c.json(answer.preferences);
  };

  inbox.get(
    `${INBOX_PATH}/preferences`,
    contract({
      summary: "Read the user's own preferences (the preference centre)",
      description:
        "What the user may change of their preferences (channel and category opt-outs, quiet hours, time zone, locale; never the device tokens or the daily cap the server-side API sets), and the categories to show: those this client sent the user lately, those the user refuses, and the critical ones (CRITICAL_CATEGORIES), locked. The document is the user's, not the client's, as on the server-side API. Each token and each user has a rate limit (429 with Retry-After and the RateLimit headers).",
      tag: "Inbox",
      scope: null,
      headers: [inboxToken],
      responses: {
        200: {
          description: "The user's preferences",
          schema: InboxPreferencesSchema,
          headers: { "Last-Modified": "When the document was last written" },
        },
      },
      problems: [...INBOX_AUTH_PROBLEMS, "dependency_unavailable"],
    }),
    user,
    async (c) => preferencesAnswer(c, await readInboxPreferences(inboxDatabase, c.get("inboxOwner"), critical)),
  );

  inbox.patch(
    `${INBOX_PATH}/preferences`,
    contract({
      summary: "Change the user's own preferences",
      description:
        "The fields sent replace theirs and the others stay as they are (quiet_hours is sent whole, or null); application/json or application/merge-patch+json. The same validation as PUT /users/{id}/preferences; any other field is a 400 naming it, and an opt-out of a critical category is a 400 naming the category; nothing is written then. category_optout replaces the user's opt-outs. The change is announced to the processors as a PUT's is, so the user's next notification is routed by it. Each token and each user has a rate limit (429 with Retry-After and the RateLimit headers).",
      tag: "Inbox",
      scope: null,
      body: InboxPreferencesUpdate,
      headers: [inboxToken],
      responses: {
        200: {
          description: "The user's preferences after the change",
          schema: InboxPreferencesSchema,
          headers: { "Last-Modified": "When the document was last written" },
        },
      },
      problems: [...INBOX_BODY_PROBLEMS, ...INBOX_AUTH_PROBLEMS, "dependency_unavailable"],
    }),
    limitBody(deps.maxBodyBytes),
    user,
    async (c) => {
      const patch = validate(InboxPreferencesUpdate, await readJson(c));
      const { answer, changed } = await changeInboxPreferences(inboxDatabase, c.get("inboxOwner"), patch, critical);
      if (changed.length > 0) {
        c.get("log").info({ fields: changed }, "preferences changed by the user");
        await spreadProfileChange(c.get("log"), deps.bus, c.get("inboxOwner").userId);
      }
      return preferencesAnswer(c, answer);
    },
  );

  inbox.patch(
    `${INBOX_PATH}/:itemId`,
    contract({
      summary: "Set an item's seen, read or archived state",
      description:
        "true sets the state (the first time is kept), false clears it. Another user's item is a 404. Each token and each user has a rate limit (429 with Retry-After and the RateLimit headers).",
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
      const item = id === null ? null : await setInboxItemState(inboxDatabase, c.get("inboxOwner"), id, change);
      if (item === null) throw new AppError("not_found", "no such inbox item");
      return c.json(item);
    },
  );

  inbox.get(
    `${INBOX_PATH}/stream`,
    contract({
      summary: "Stream new inbox items (Server-Sent Events)",
      description:
        'text/event-stream: a `ready` event, then one `notification` event per new item (id = the item id, data = the item), a `counts` event (no id; data = {"unread", "unseen", "total"}, as GET /inbox/counts) after `ready` and whenever they change (an item stored, or marked through any route on any instance), and a comment line while idle. Reconnect with Last-Event-ID to receive everything stored after it; without it the stream starts at what is new. When the token stops working (it expires, it or all the user\'s tokens are revoked, or its key is revoked) the stream sends `token_ended` (data: {"reason": "expired" | "revoked" | "key_revoked"}) and ends: reconnect with a new token. Open streams are capped per token, per user and per client (429) and per process (503), all with Retry-After.',
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
      // The client's next request goes to a connection of its own, to an instance still serving.
      if (deps.isStopping()) c.header("Connection", "close");
      const open = streams.open(c.get("inboxToken"));
      // Woken (by NOTIFY or the process's poller) from before the first read on: nothing stored
      // after that read is missed. `pending`: items to read; `countsSince`: counts to send, as of
      // that hub sequence or later (null: none due). The first counts follow `ready`.
      let pending = false;
      let countsSince: number | null = hub.sequence();
      let wakeUp: (() => void) | undefined;
      const wake = (change: InboxChange, since: number) => {
        if (change === "items") pending = true;
        else countsSince = Math.max(countsSince ?? 0, since);
        wakeUp?.();
      };
      const unsubscribe = hub.subscribe(owner.userId, wake);
      let after: number;
      try {
        // A fresh stream starts at what is new; the inbox list has everything before it.
        if (lastEventId) {
          after = Number(lastEventId);
          pending = true;
        } else {
          after = await latestInboxItemId(inboxDatabase, owner);
        }
      } catch (error) {
        unsubscribe();
        open.close();
        throw error;
      }
      const log = c.get("log");
      // nginx would otherwise buffer the stream and hold events back.
      c.header("x-accel-buffering", "no");
      return streamSSE(
        c,
        async (stream) => {
          let keepAliveDue = true;
          const rouse = () => wakeUp?.();
          open.onEnd(rouse);
          stream.onAbort(rouse);
          // A comment on a timer keeps proxies from closing an idle stream; it queries nothing.
          const keepAlive = setInterval(() => {
            keepAliveDue = true;
            rouse();
          }, settings.keepAliveMs);
          try {
            await stream.writeSSE({ event: "ready", data: JSON.stringify({ after: String(after) }), retry: 3000 });
            let sent: InboxCounts | undefined;
            while (!stream.aborted && open.ended === undefined) {
              if (pending) {
                pending = false;
                const items = await listInboxItemsAfter(inboxDatabase, owner, after, BATCH);
                for (const item of items) {
                  await stream.writeSSE({ id: item.id, event: "notification", data: JSON.stringify(item) });
                  after = Number(item.id);
                }
                if (items.length === BATCH) pending = true;
                if (items.length > 0) {
                  keepAliveDue = false;
                  // New items change the counts; a wake-up without any (another client's item of
                  // the same user id, a redelivery) costs no count.
                  countsSince = Math.max(countsSince ?? 0, hub.sequence());
                }
                continue;
              }
              if (countsSince !== null) {
                const since = countsSince;
                countsSince = null;
                // Shared with this owner's other streams in this process woken by the same change.
                const counts = await hub.counts(owner, since);
                if (!sameCounts(sent, counts)) {
                  // No id: ids are item ids, which Last-Event-ID resumes after.
                  await stream.writeSSE({ event: "counts", data: JSON.stringify(counts) });
                  sent = counts;
                }
                continue;
              }
              if (keepAliveDue) {
                keepAliveDue = false;
                await stream.write(": keep-alive\n\n");
                continue;
              }
              await new Promise<void>((resolve) => {
                wakeUp = resolve;
                if (pending || countsSince !== null || keepAliveDue || stream.aborted || open.ended !== undefined) {
                  resolve();
                }
              });
              wakeUp = undefined;
            }
            const ended = open.ended;
            if (ended !== undefined && ended !== "stopping" && !stream.aborted) {
              await stream.writeSSE({ event: "token_ended", data: JSON.stringify({ reason: ENDED[ended] }) });
            }
          } finally {
            clearInterval(keepAlive);
            unsubscribe();
            open.close();
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
