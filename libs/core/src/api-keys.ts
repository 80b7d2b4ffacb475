import { hash, randomBytes } from "node:crypto";

export const SCOPES = ["ingest", "read", "preferences", "inbox", "admin"] as const;
export type Scope = (typeof SCOPES)[number];

/** Recognisable prefix: secret scanners and people can tell a notify key at a glance. */
export const KEY_PREFIX = "ntf_";

/** Only this hash is stored. One-shot: a Hash object per request costs three times as much. */
export const hashKey = (key: string) => hash("sha256", key, "hex");

/** 32 random bytes in base64url: 43 characters after the prefix, 47 in all. */
export const generateKey = () => `${KEY_PREFIX}${randomBytes(32).toString("base64url")}`;

/** The part of a key shown in listings, enough to tell keys apart, useless to an attacker. */
export const keyDisplayPrefix = (key: string) => key.slice(0, 12);
