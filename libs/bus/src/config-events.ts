import type { Bus } from "./connection.js";
import { subjectName } from "./topology.js";

/**
 * Configuration changes every running instance must see at once, announced on core NATS
 * subjects (not streams): at most once, so an instance disconnected at that moment still sees
 * the change when its cache entry ages out. Each cache that listens has such a bound.
 */

/** An API key was revoked or rotated: every ingest instance drops what it cached of it. */
export interface KeyChanged {
  key_id: string;
}

/** A template got a version (or was created): caches of its latest version and parameters drop it. */
export interface TemplateChanged {
  template_id: string;
}

/**
 * A user's preferences or contacts changed (through the API, the inbox's preference centre or an
 * unsubscribe link): every processor drops the profile it holds of that user, so the next
 * notification is routed by the change.
 */
export interface ProfileChanged {
  user_id: string;
}

/**
 * Inbox tokens were revoked: every ingest instance adds the revocation to the set it holds in
 * memory and ends the streams it covers. Announced on the key events' subject (a credential
 * change, heard by the same instances); `inbox_user_id` is what tells it from a key change, which
 * has `key_id` instead.
 */
export interface InboxTokensRevoked {
  inbox_user_id: string;
  client_id: string;
  /** One token; null: every token of the user from that client issued up to `revoked_at`. */
  token_id: string | null;
  /** RFC 3339, in milliseconds. */
  revoked_at: string;
}

type Announcer = Pick<Bus, "nc" | "naming">;

export const keyEventsSubject = (bus: Pick<Bus, "naming">) => subjectName(bus.naming, "notify.events.keys");
export const templateEventsSubject = (bus: Pick<Bus, "naming">) => subjectName(bus.naming, "notify.events.templates");
export const profileEventsSubject = (bus: Pick<Bus, "naming">) => subjectName(bus.naming, "notify.events.profiles");

/** Publishes one announcement; answers whether the server had it within `timeoutMs`. */
async function announce(bus: Announcer, subject: string, event: object, timeoutMs: number): Promise<boolean> {
  bus.nc.publish(subject, JSON.stringify(event));
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    return await Promise.race([bus.nc.flush().then(() => true), late]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/** Calls `listener` with each announcement whose `field` is a string; returns the unsubscribe. */
function hear<T extends object>(bus: Announcer, subject: string, field: keyof T, listener: (event: T) => void) {
  const subscription = bus.nc.subscribe(subject, {
    callback: (error, msg) => {
      if (error) return;
      try {
        const event = msg.json<T>();
        if (typeof event?.[field] === "string") listener(event);
      } catch {
        // Not ours to crash on: a malformed announcement is ignored; the TTL still bounds the cache.
      }
    },
  });
  return () => subscription.unsubscribe();
}

/** Tells every running ingest instance that a key changed (AUTH_CACHE_TTL_SECONDS bounds a miss). */
export const announceKeyChanged = (bus: Announcer, event: KeyChanged, timeoutMs = 2000) =>
  announce(bus, keyEventsSubject(bus), event, timeoutMs);

/** Each key change announced by any instance or the CLI. */
export const onKeyChanged = (bus: Announcer, listener: (event: KeyChanged) => void) =>
  hear<KeyChanged>(bus, keyEventsSubject(bus), "key_id", listener);

/**
 * Tells every running ingest instance that inbox tokens were revoked (INBOX_REVOCATION_REFRESH_SECONDS
 * bounds a miss: each instance reads the revocations stored since its last read).
 */
export const announceInboxTokensRevoked = (bus: Announcer, event: InboxTokensRevoked, timeoutMs = 2000) =>
  announce(bus, keyEventsSubject(bus), event, timeoutMs);

/** Each inbox token revocation announced by any instance; one whose fields are not all well-formed is ignored. */
export const onInboxTokensRevoked = (bus: Announcer, listener: (event: InboxTokensRevoked) => void) =>
  hear<InboxTokensRevoked>(bus, keyEventsSubject(bus), "inbox_user_id", (event) => {
    const tokenId = event.token_id ?? null;
    if (typeof event.client_id !== "string" || (tokenId !== null && typeof tokenId !== "string")) return;
    if (typeof event.revoked_at !== "string" || Number.isNaN(Date.parse(event.revoked_at))) return;
    listener({
      inbox_user_id: event.inbox_user_id,
      client_id: event.client_id,
      token_id: tokenId,
      revoked_at: event.revoked_at,
    });
  });

/** Tells every ingest and processor instance that a template changed (their caches' TTL bounds a miss). */
export const announceTemplateChanged = (bus: Announcer, event: TemplateChanged, timeoutMs = 2000) =>
  announce(bus, templateEventsSubject(bus), event, timeoutMs);

/** Each template change announced by any ingest instance. */
export const onTemplateChanged = (bus: Announcer, listener: (event: TemplateChanged) => void) =>
  hear<TemplateChanged>(bus, templateEventsSubject(bus), "template_id", listener);

/** Tells every processor instance that a user's profile changed (PREFERENCE_CACHE_TTL_MS bounds a miss). */
export const announceProfileChanged = (bus: Announcer, event: ProfileChanged, timeoutMs = 2000) =>
  announce(bus, profileEventsSubject(bus), event, timeoutMs);

/** Each profile change announced by any ingest instance. */
export const onProfileChanged = (bus: Announcer, listener: (event: ProfileChanged) => void) =>
  hear<ProfileChanged>(bus, profileEventsSubject(bus), "user_id", listener);
