import { type Database, type InboxTokenRevocation, listInboxTokenRevocations } from "@notify/db";
import type { Logger } from "@notify/log";
import { MAX_TOKEN_LIFETIME_SECONDS } from "./settings.js";

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
 */
export interface InboxRevocations {
  /** Whether the revocations in force have been read: until then `covers` cannot answer. */
  isLoaded(): boolean;
  /** Resolves once they are read (a read starts if none is under way); rejects if it fails. */
  whenLoaded(): Promise<void>;
  /** Whether the token is revoked: by its id, or by a revocation of its user's tokens at or after its issue. */
  covers(token: RevocableToken): boolean;
  add(revocation: InboxTokenRevocation): void;
  /** Calls `listener` with each revocation new to this instance; answers the way to stop. */
  onRevoked(listener: (revocation: InboxTokenRevocation) => void): () => void;
  close(): void;
}

/** How far before the last read a refresh reads again: clocks of other instances, commits that took a while. */
const REREAD_MS = 5 * 60_000;
const LIFETIME_MS = MAX_TOKEN_LIFETIME_SECONDS * 1000;

const userKey = (clientId: string, userId: string) => `${clientId}\n${userId}`;
const tokenKey = (clientId: string, userId: string, tokenId: string) => `${clientId}\n${userId}\n${tokenId}`;

export function createInboxRevocations(
  database: Database,
  options: { refreshMs?: number; log?: Logger; now?: () => number } = {},
): InboxRevocations {
  const now = options.now ?? Date.now;
  const refreshMs = options.refreshMs ?? 30_000;
  // Per token: when the entry may go (every token it can cover has expired).
  const tokens = new Map<string, number>();
  // Per user of a client: the latest revocation of all their tokens, and when it may go.
  const users = new Map<string, { revokedMs: number; expiresMs: number }>();
  const listeners = new Set<(revocation: InboxTokenRevocation) => void>();
  let loaded = false;
  let loading: Promise<void> | null = null;
  let lastRead = 0;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  /** Adds a revocation; answers whether it was new here. */
  const apply = (revocation: InboxTokenRevocation): boolean => {
    const revokedMs = revocation.revokedAt.getTime();
    const expiresMs = revokedMs + LIFETIME_MS;
    if (revocation.tokenId !== null) {
      const key = tokenKey(revocation.clientId, revocation.userId, revocation.tokenId);
      const known = tokens.get(key);
      tokens.set(key, Math.max(known ?? 0, expiresMs));
      return known === undefined;
    }
    const key = userKey(revocation.clientId, revocation.userId);
    const known = users.get(key);
    if (known !== undefined && known.revokedMs >= revokedMs) return false;
    users.set(key, { revokedMs, expiresMs: Math.max(known?.expiresMs ?? 0, expiresMs) });
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
    for (const [key, expiresMs] of tokens) if (expiresMs < at) tokens.delete(key);
    for (const [key, entry] of users) if (entry.expiresMs < at) users.delete(key);
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
