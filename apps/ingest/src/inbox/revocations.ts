import { type Database, type InboxTokenRevocation, listInboxTokenRevocations } from "@notify/db";
import type { Logger } from "@notify/log";
import { CLOCK_TOLERANCE_SECONDS, MAX_TOKEN_LIFETIME_SECONDS } from "./settings.js";

/** What a revocation is checked against: a token's owner, its id (null for an opaque token) and its issue. */
export interface RevocableToken {
  clientId: string;
  userId: string;
  tokenId: string | null;
  issuedMs: number;
}

/**
 * The inbox token revocations in force, held in memory by each ingest instance, so that a
 * signed token is checked without a lookup. Read in full at start, then every `refreshMs` the
 * ones revoked since the last read (with a margin for clocks and slow commits); a revocation
 * made here or announced on NATS is added at once (`add`), the refresh bounds one missed.
 *
 * Each entry goes when the last token it covers has expired (`revocationExpiresMs`). What one
 * client holds is capped (inbox_token_revocation_counts, INBOX_REVOCATIONS_PER_CLIENT), so the
 * entries of an instance number at most clients times that cap.
 */
export interface InboxRevocations {
  /** Whether the revocations in force have been read: until then `covers` cannot answer. */
  isLoaded(): boolean;
  /** Resolves once they are read (a read starts if none is under way); rejects if it fails. */
  whenLoaded(): Promise<void>;
  /** Whether the token is revoked: by its id, or by a revocation of its user's tokens at or after its issue. */
  covers(token: RevocableToken): boolean;
  /** Whether this instance holds an entry for the revocation's token (or user): adding it takes no new place. */
  holds(revocation: Pick<InboxTokenRevocation, "clientId" | "userId" | "tokenId">): boolean;
  /** How many entries the client has here (what its cap counts, until the next prune). */
  heldBy(clientId: string): number;
  add(revocation: InboxTokenRevocation): void;
  /** Calls `listener` with each revocation new to this instance; answers the way to stop. */
  onRevoked(listener: (revocation: InboxTokenRevocation) => void): () => void;
  close(): void;
}

/** How far before the last read a refresh reads again: clocks of other instances, commits that took a while. */
const REREAD_MS = 5 * 60_000;
const LIFETIME_MS = MAX_TOKEN_LIFETIME_SECONDS * 1000;
const TOLERANCE_MS = CLOCK_TOLERANCE_SECONDS * 1000;

const TOKEN_ID = /^([0-9a-f]{8})-([0-9a-f]{4})-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** When the token with this id was issued, in Unix ms (a UUIDv7's first 48 bits); null if it is no UUIDv7. */
export function tokenIdIssuedMs(tokenId: string): number | null {
  const match = TOKEN_ID.exec(tokenId);
  return match === null ? null : Number.parseInt(`${match[1]}${match[2]}`, 16);
}

/**
 * Whether an id can name a token that still works somewhere: a UUIDv7 issued within the longest
 * lifetime before `now` and not after it (both give or take the instances' clock tolerance).
 * Any other id names a token that cannot exist or has expired: its revocation is not stored.
 */
export function mayNameLiveToken(tokenId: string, now: number): boolean {
  const issuedMs = tokenIdIssuedMs(tokenId);
  return issuedMs !== null && issuedMs <= now + TOLERANCE_MS && issuedMs + LIFETIME_MS + TOLERANCE_MS > now;
}

/**
 * When a revocation may go, because every token it covers has expired: for one token, its issue
 * (from its id) plus the longest lifetime; for all of a user's, the revocation plus it.
 */
export function revocationExpiresMs(revocation: Pick<InboxTokenRevocation, "tokenId" | "revokedAt">): number {
  const issuedMs = revocation.tokenId === null ? null : tokenIdIssuedMs(revocation.tokenId);
  return (issuedMs ?? revocation.revokedAt.getTime()) + LIFETIME_MS;
}

const userKey = (clientId: string, userId: string) => `${clientId}\n${userId}`;
const tokenKey = (clientId: string, userId: string, tokenId: string) => `${clientId}\n${userId}\n${tokenId}`;

export function createInboxRevocations(
  database: Database,
  options: { refreshMs?: number; log?: Logger; now?: () => number } = {},
): InboxRevocations {
  const now = options.now ?? Date.now;
  const refreshMs = options.refreshMs ?? 30_000;
  // Per token: its client, and when the entry may go (the token has expired).
  const tokens = new Map<string, { clientId: string; expiresMs: number }>();
  // Per user of a client: the latest revocation of all their tokens, and when it may go.
  const users = new Map<string, { clientId: string; revokedMs: number; expiresMs: number }>();
  // Per client: how many entries of both maps are its.
  const held = new Map<string, number>();
  const count = (clientId: string, change: number) => {
    const left = (held.get(clientId) ?? 0) + change;
    if (left > 0) held.set(clientId, left);
    else held.delete(clientId);
  };
  const listeners = new Set<(revocation: InboxTokenRevocation) => void>();
  let loaded = false;
  let loading: Promise<void> | null = null;
  let lastRead = 0;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  /** Adds a revocation; answers whether it was new here. */
  const apply = (revocation: InboxTokenRevocation): boolean => {
    const { clientId } = revocation;
    const revokedMs = revocation.revokedAt.getTime();
    const expiresMs = revocationExpiresMs(revocation);
    if (revocation.tokenId !== null) {
      const key = tokenKey(clientId, revocation.userId, revocation.tokenId);
      if (tokens.has(key)) return false;
      tokens.set(key, { clientId, expiresMs });
      count(clientId, 1);
      return true;
    }
    const key = userKey(clientId, revocation.userId);
    const known = users.get(key);
    if (known !== undefined && known.revokedMs >= revokedMs) return false;
    users.set(key, { clientId, revokedMs, expiresMs: Math.max(known?.expiresMs ?? 0, expiresMs) });
    if (known === undefined) count(clientId, 1);
    return true;
  };

  const announce = (revocation: InboxTokenRevocation) => {
    for (const listener of listeners) {
      try {
        listener(revocation);
      } catch (error) {
        options.log?.warn({ err: error }, "an inbox revocation listener failed");
      }
    }
  };

  const prune = () => {
    const at = now();
    for (const map of [tokens, users]) {
      for (const [key, entry] of map) {
        if (entry.expiresMs >= at) continue;
        map.delete(key);
        count(entry.clientId, -1);
      }
    }
  };

  const read = async () => {
    const started = now();
    const rows = await listInboxTokenRevocations(database, loaded ? new Date(lastRead - REREAD_MS) : null);
    lastRead = started;
    for (const row of rows) if (apply(row) && loaded) announce(row);
    loaded = true;
    prune();
  };

  const load = (): Promise<void> => {
    loading ??= read().finally(() => {
      loading = null;
    });
    return loading;
  };

  const schedule = () => {
    if (closed || refreshMs <= 0) return;
    timer = setTimeout(() => {
      load()
        .catch((error: unknown) =>
          options.log?.warn({ err: error }, "could not read the inbox token revocations; the next refresh will"),
        )
        .finally(schedule);
    }, refreshMs);
    timer.unref();
  };
  load()
    .catch((error: unknown) =>
      options.log?.warn({ err: error }, "could not read the inbox token revocations; inbox requests retry the read"),
    )
    .finally(schedule);

  return {
    isLoaded: () => loaded,
    whenLoaded: () => (loaded ? Promise.resolve() : load()),
    covers(token) {
      if (token.tokenId !== null && tokens.has(tokenKey(token.clientId, token.userId, token.tokenId))) return true;
      const all = users.get(userKey(token.clientId, token.userId));
      return all !== undefined && token.issuedMs <= all.revokedMs;
    },
    holds(revocation) {
      const { clientId, userId, tokenId } = revocation;
      return tokenId === null ? users.has(userKey(clientId, userId)) : tokens.has(tokenKey(clientId, userId, tokenId));
    },
    heldBy: (clientId) => held.get(clientId) ?? 0,
    add(revocation) {
      if (apply(revocation)) announce(revocation);
    },
    onRevoked(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close() {
      closed = true;
      clearTimeout(timer);
    },
  };
}
