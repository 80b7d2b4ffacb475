import { hash, randomBytes } from "node:crypto";

/**
 * What a key may do. `ingest` sends and `read` reads the key's own client's notifications;
 * `preferences` and `contacts` read and write users' preferences and addresses (users are the
 * organisation's, so any client's key reaches any user); `inbox` mints and revokes its client's
 * inbox tokens; `broadcast` manages audiences (the organisation's) and its client's broadcasts.
 * `admin` holds all of these, reads templates and manages its own client's keys. `operator` is
 * the deployment's: every client's keys and notifications, template writes, dead letters and
 * replays, the console; no client key holds it unless an operator grants it.
 */
export const SCOPES = [
  "ingest",
  "read",
  "preferences",
  "contacts",
  "inbox",
  "broadcast",
  "webhooks",
  "admin",
  "operator",
] as const;
export type Scope = (typeof SCOPES)[number];

/** The scopes each scope includes besides itself. */
const INCLUDES: Record<Scope, readonly Scope[]> = {
  ingest: [],
  read: [],
  preferences: [],
  contacts: [],
  inbox: [],
  broadcast: [],
  webhooks: [],
  admin: ["ingest", "read", "preferences", "contacts", "inbox", "broadcast", "webhooks"],
  operator: ["ingest", "read", "preferences", "contacts", "inbox", "broadcast", "webhooks", "admin"],
};

/** Whether a key holding `held` may do what `wanted` allows. */
export const scopesInclude = (held: readonly Scope[], wanted: Scope): boolean =>
  held.some((scope) => scope === wanted || INCLUDES[scope].includes(wanted));

/** Recognisable prefix: secret scanners and people can tell a notify key at a glance. */
export const KEY_PREFIX = "ntf_";

/** Only this hash is stored. One-shot `hash()`: it runs per request, and a Hash object costs more. */
export const hashKey = (key: string) => hash("sha256", key, "hex");

/** 32 random bytes in base64url: 43 characters after the prefix, 47 in all. */
export const generateKey = () => `${KEY_PREFIX}${randomBytes(32).toString("base64url")}`;

/** The part of a key shown in listings, enough to tell keys apart, useless to an attacker. */
export const keyDisplayPrefix = (key: string) => key.slice(0, 12);
