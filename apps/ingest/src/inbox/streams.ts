import { AppError } from "@notify/core";
import type { Logger } from "@notify/log";
import type { CachedKeyLookup } from "../auth/api-keys.js";
import type { InboxRevocations } from "./revocations.js";
import { type InboxSettings, STREAM_CAP_RETRY_SECONDS, streamsPerClientOf } from "./settings.js";
import { credentialProblem, type InboxCredential } from "./tokens.js";

/** Why a stream is ended by the server: its token stopped working, or the process is stopping. */
export type StreamEnd = "expired" | "revoked" | "key_revoked" | "stopping";

/** One open stream, as the registry sees it. */
export interface OpenInboxStream {
  /** Why the stream must end now; undefined while it may go on. */
  readonly ended: StreamEnd | undefined;
  /** Calls `listener` once, when `ended` is set. */
  onEnd(listener: () => void): void;
  /** The stream is over: it leaves the counts. */
  close(): void;
}

/**
 * The open streams of this process: their caps (per token, per user of a client and per client,
 * 429 beyond; per process, 503 beyond, both with Retry-After: one client's users never take the
 * whole process from everyone else's), and their credentials checked again while they
 * are open. Every `recheckMs`, while any is open, each token's expiry and revocation is checked in
 * memory, and its minting key's state once per key (`lookupKey.active`, from the key cache, whose
 * entries a key change announced on NATS drops at once and AUTH_CACHE_TTL_SECONDS bounds); a
 * revocation new to this instance ends the streams it covers at once.
 */
export interface InboxStreams {
  open(credential: InboxCredential): OpenInboxStream;
  /** How many streams are open in this process. */
  count(): number;
}

interface Entry extends OpenInboxStream {
  credential: InboxCredential;
  end(reason: StreamEnd): void;
}

const userKey = (clientId: string, userId: string) => `${clientId}\n${userId}`;

export function createInboxStreams(deps: {
  settings: Pick<
    InboxSettings,
    "streamsPerToken" | "streamsPerUser" | "streamsPerClient" | "streamsPerProcess" | "recheckMs"
  >;
  lookupKey: Pick<CachedKeyLookup, "active">;
  revocations: InboxRevocations;
  isStopping: () => boolean;
  log: Logger;
  now?: () => number;
}): InboxStreams {
  const { settings, revocations } = deps;
  const now = deps.now ?? Date.now;
  const all = new Set<Entry>();
  const byToken = new Map<string, number>();
  const byUser = new Map<string, Set<Entry>>();
  const byClient = new Map<string, number>();
  const perClient = streamsPerClientOf(settings);
  // Keys whose state is being read: one read per key at a time, however many streams it minted.
  const checking = new Set<string>();
  let timer: NodeJS.Timeout | undefined;

  const recheck = () => {
    const at = now();
    const stopping = deps.isStopping();
    const byKey = new Map<string, Entry[]>();
    for (const entry of all) {
      const problem = stopping ? "stopping" : credentialProblem(entry.credential, revocations, at);
      if (problem !== null) {
        entry.end(problem);
        continue;
      }
      const minted = byKey.get(entry.credential.keyId);
      if (minted === undefined) byKey.set(entry.credential.keyId, [entry]);
      else minted.push(entry);
    }
    for (const [keyId, entries] of byKey) {
      if (checking.has(keyId)) continue;
      const ended = (active: boolean) => {
        if (!active) for (const entry of entries) entry.end("key_revoked");
      };
      const active = deps.lookupKey.active(keyId);
      if (!(active instanceof Promise)) {
        ended(active);
        continue;
      }
      checking.add(keyId);
      active
        .then(ended, (error: unknown) =>
          // Which it is cannot be told now: the streams go on, and the next check asks again.
          deps.log.debug({ err: error, key_id: keyId }, "could not check an inbox stream's key"),
        )
        .finally(() => checking.delete(keyId));
    }
  };

  const startChecking = () => {
    if (timer !== undefined) return;
    timer = setInterval(recheck, settings.recheckMs);
    timer.unref();
  };

  revocations.onRevoked((revocation) => {
    for (const entry of byUser.get(userKey(revocation.clientId, revocation.userId)) ?? []) {
      if (credentialProblem(entry.credential, revocations, now()) === "revoked") entry.end("revoked");
    }
  });

  return {
    count: () => all.size,
    open(credential) {
      const { owner, tokenKey } = credential;
      const user = userKey(owner.clientId, owner.userId);
      const retry = { retryAfterSeconds: STREAM_CAP_RETRY_SECONDS };
      // A stopping process would end the stream within a recheck; a client reconnecting at once
      // on its kept-alive connection would hold the server's close open for as long.
      if (deps.isStopping()) {
        throw new AppError("dependency_unavailable", "this process is stopping: open the stream again", {
          context: retry,
        });
      }
      if ((byToken.get(tokenKey) ?? 0) >= settings.streamsPerToken) {
        throw new AppError(
          "rate_limited",
          `this inbox token has ${settings.streamsPerToken} streams open, as many as one token may; close one first`,
          { context: retry },
        );
      }
      if ((byUser.get(user)?.size ?? 0) >= settings.streamsPerUser) {
        throw new AppError(
          "rate_limited",
          `this user has ${settings.streamsPerUser} inbox streams open, as many as one user may; close one first`,
          { context: retry },
        );
      }
      if ((byClient.get(owner.clientId) ?? 0) >= perClient) {
        throw new AppError(
          "rate_limited",
          `this client's users have ${perClient} inbox streams open in this process, as many as one client may; try again later`,
          { context: retry },
        );
      }
      if (all.size >= settings.streamsPerProcess) {
        throw new AppError("dependency_unavailable", "this process serves as many inbox streams as it may", {
          context: retry,
        });
      }
      const listeners: Array<() => void> = [];
      let open = true;
      // To the millisecond, not at the next check.
      const expiry = setTimeout(() => entry.end("expired"), Math.max(0, credential.expiresMs - now()));
      expiry.unref();
      const entry: Entry = {
        credential,
        ended: undefined,
        onEnd(listener) {
          if (entry.ended === undefined) listeners.push(listener);
          else listener();
        },
        end(reason) {
          if (entry.ended !== undefined) return;
          (entry as { ended: StreamEnd | undefined }).ended = reason;
          for (const listener of listeners.splice(0)) listener();
        },
        close() {
          if (!open) return;
          open = false;
          clearTimeout(expiry);
          all.delete(entry);
          const left = (byToken.get(tokenKey) ?? 1) - 1;
          if (left > 0) byToken.set(tokenKey, left);
          else byToken.delete(tokenKey);
          const streams = byUser.get(user);
          streams?.delete(entry);
          if (streams?.size === 0) byUser.delete(user);
          const clientLeft = (byClient.get(owner.clientId) ?? 1) - 1;
          if (clientLeft > 0) byClient.set(owner.clientId, clientLeft);
          else byClient.delete(owner.clientId);
          if (all.size === 0) {
            clearInterval(timer);
            timer = undefined;
          }
        },
      };
      all.add(entry);
      byToken.set(tokenKey, (byToken.get(tokenKey) ?? 0) + 1);
      const streams = byUser.get(user) ?? new Set<Entry>();
      streams.add(entry);
      byUser.set(user, streams);
      byClient.set(owner.clientId, (byClient.get(owner.clientId) ?? 0) + 1);
      startChecking();
      return entry;
    },
  };
}
