import { hash, randomBytes } from "node:crypto";

/**
 * What a key may do. The client scopes act on the key's own client only: `ingest` sends,
 * `read` reads its notifications, `preferences` reads and writes users' preferences,
 * `contacts` reads and writes users' addresses, `inbox` mints inbox tokens, `broadcast`
 * manages audiences and its client's broadcasts. `admin` holds every client scope, writes
 * templates and manages its own client's keys. `operator` is the deployment's: every client's
 * keys and notifications, dead letters and replays, the console; no client key holds it unless
 * an operator grants it.
 */
export const SCOPES = ["ingest", "read", "preferences", "contacts", "inbox", "broadcast", "admin", "operator"] as const;
export type Scope = (typeof SCOPES)[number];

/** The scopes each scope includes besides itself. */
const INCLUDES: Record<Scope, readonly Scope[]> = {
  ingest: [],
  read: [],
  preferences: [],
  contacts: [],
  inbox: [],
  broadcast: [],
  admin: ["ingest", "read", "preferences", "contacts", "inbox", "broadcast"],
  operator: ["ingest", "read", "preferences", "contacts", "inbox", "broadcast", "admin"],
};

/** Whether a key holding `held` may do what `wanted` allows. */
export const scopesInclude = (held: readonly Scope[], wanted: Scope): boolean =>
  held.some((scope) => scope === wanted || INCLUDES[scope].includes(wanted));

/** Recognisable prefix: secret scanners and people can tell a notify key at a glance. */
export const KEY_PREFIX = "ntf_";

/** Only this hash is stored. One-shot: a Hash object per request costs three times as much. */
export const hashKey = (key: string) => hash("sha256", key, "hex");

/** 32 random bytes in base64url: 43 characters after the prefix, 47 in all. */
export const generateKey = () => `${KEY_PREFIX}${randomBytes(32).toString("base64url")}`;

/** The part of a key shown in listings, enough to tell keys apart, useless to an attacker. */
export const keyDisplayPrefix = (key: string) => key.slice(0, 12);
