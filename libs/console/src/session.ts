import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { ReplayAnswer } from "./views.js";

/**
 * The console's sign-in sessions, in this process's memory only: a restart signs everyone out,
 * which is acceptable for an operator's tool and keeps the operator key off every disk. The
 * cookie holds a random 32-byte id; only its SHA-256 is kept here, so a heap dump or a log of
 * this map yields no usable cookie. The operator key is kept beside it (the console calls the
 * API with it) and never leaves this map: not in a log line, a URL or a page.
 */
export const SESSION_COOKIE = "notify_console";

/** The session cookie as a browser holds it: read, set and cleared with the same attributes. */
export interface SessionCookie {
  /** Its name in the browser: `__Host-notify_console` behind TLS, else `notify_console`. */
  readonly name: string;
  read(c: Context): string | undefined;
  write(c: Context, id: string): void;
  clear(c: Context): void;
}

/**
 * The session cookie: HttpOnly, SameSite=Strict. With `tls` (CONSOLE_TLS: browsers reach the
 * console over https, through a proxy) it is Secure with the `__Host-` prefix, so a browser
 * keeps it only from https, sends it only over https, and takes it from no other host or path
 * (Path=/, no Domain). Without, the console is on loopback over http, where a Secure cookie
 * would not be kept: it is scoped to /console.
 */
export function sessionCookie(tls: boolean): SessionCookie {
  const common = { httpOnly: true, sameSite: "Strict" as const };
  const options = tls
    ? { ...common, prefix: "host" as const, path: "/", secure: true }
    : { ...common, path: "/console", secure: false };
  const prefix = tls ? ("host" as const) : undefined;
  return {
    name: tls ? `__Host-${SESSION_COOKIE}` : SESSION_COOKIE,
    read: (c) => getCookie(c, SESSION_COOKIE, prefix),
    write: (c, id) => setCookie(c, SESSION_COOKIE, id, options),
    clear: (c) => {
      deleteCookie(c, SESSION_COOKIE, options);
    },
  };
}

export interface Session {
  /** The operator key the operator signed in with. */
  readonly key: string;
  /** Carried by every POST form of this session (hidden field `csrf`). */
  readonly csrf: string;
  readonly createdAt: number;
  lastSeenAt: number;
  /** One message for the next page (after a redirect): what an action did. */
  notice?: string;
  /**
   * A replay's results, shown once by the page the replay redirects to: reloading that page
   * shows them no more and replays nothing (the POST is never repeated by a reload).
   */
  replayed?: ReplayAnswer;
}

export interface SessionOptions {
  /** A session unused this long ends (default 1 h). */
  idleMs?: number;
  /** A session ends this long after sign-in, used or not (default 12 h). */
  absoluteMs?: number;
  /** Sessions kept at most; beyond it the least recently used one ends (default 1000). */
  max?: number;
  now?: () => number;
}

export interface SessionStore {
  /** Mints a session for a key already checked; answers the cookie value (the only copy of the id). */
  create(key: string): { id: string; session: Session };
  /** The live session of a cookie value, touched; undefined when unknown or expired (then it is gone). */
  get(id: string | undefined): Session | undefined;
  /** Ends the session of a cookie value (sign-out, or the API refused its key). */
  end(id: string | undefined): void;
  readonly size: number;
}

const COOKIE_ID = /^[A-Za-z0-9_-]{43}$/;
const digest = (id: string) => createHash("sha256").update(id).digest("base64url");

export function createSessionStore(options: SessionOptions = {}): SessionStore {
  const idleMs = options.idleMs ?? 3_600_000;
  const absoluteMs = options.absoluteMs ?? 12 * 3_600_000;
  const max = options.max ?? 1000;
  const now = options.now ?? Date.now;
  // A Map keeps insertion order: a session is re-inserted when used, so the first is the least recently used.
  const sessions = new Map<string, Session>();

  const expired = (session: Session, at: number) =>
    at - session.lastSeenAt >= idleMs || at - session.createdAt >= absoluteMs;

  const sweep = (at: number) => {
    for (const [hash, session] of sessions) if (expired(session, at)) sessions.delete(hash);
  };

  return {
    create(key) {
      const at = now();
      if (sessions.size >= max) sweep(at);
      while (sessions.size >= max) {
        const oldest = sessions.keys().next().value as string;
        sessions.delete(oldest);
      }
      const id = randomBytes(32).toString("base64url");
      const session: Session = { key, csrf: randomBytes(32).toString("base64url"), createdAt: at, lastSeenAt: at };
      sessions.set(digest(id), session);
      return { id, session };
    },
    get(id) {
      if (id === undefined || !COOKIE_ID.test(id)) return undefined;
      const hash = digest(id);
      const session = sessions.get(hash);
      if (session === undefined) return undefined;
      const at = now();
      sessions.delete(hash);
      if (expired(session, at)) return undefined;
      session.lastSeenAt = at;
      sessions.set(hash, session);
      return session;
    },
    end(id) {
      if (id !== undefined && COOKIE_ID.test(id)) sessions.delete(digest(id));
    },
    get size() {
      return sessions.size;
    },
  };
}

/** Whether a submitted CSRF token is the session's, in time independent of where they differ. */
export function csrfMatches(session: Session, submitted: unknown): boolean {
  if (typeof submitted !== "string" || submitted === "") return false;
  // Digests have equal lengths, as timingSafeEqual needs, whatever was submitted.
  return timingSafeEqual(
    createHash("sha256").update(submitted).digest(),
    createHash("sha256").update(session.csrf).digest(),
  );
}
