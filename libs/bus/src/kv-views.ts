import { JetStreamApiCodes, JetStreamApiError } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { RequestError } from "@nats-io/transport-node";

/**
 * A KV bucket whose stream is not on the NATS server, and that this process could not put back:
 * its role may not create it (NATS_TOPOLOGY=verify: the setup job does), or the attempt failed.
 * `cause` says why (a TopologyMissingError, or the error the attempt met). Callers that can work
 * without the bucket (the rate limiter on its own buckets, the shared breaker on its own calls)
 * tell it apart with isBucketMissing.
 */
export class BucketMissingError extends Error {
  override name = "BucketMissingError";
  readonly bucket: string;
  constructor(bucket: string, cause: unknown) {
    super(`KV bucket ${bucket} is missing on the NATS server and could not be put back yet`, { cause });
    this.bucket = bucket;
  }
}

export const isBucketMissing = (error: unknown): error is BucketMissingError => error instanceof BucketMissingError;

/**
 * What a process's KV views met: a bucket found gone was put back with the declared topology
 * ("restored"; also said when a bucket this process could not put back answers again), or could
 * not be ("missing": said once, when it is first found so, not at each operation).
 */
export interface BucketEvent {
  /** The bucket's name on the server (with the namespace). */
  bucket: string;
  state: "restored" | "missing";
  /** Why it could not be put back ("missing"). */
  error?: unknown;
}

/** How soon a process tries again to put back a bucket it could not: doubling up to the most. */
export const BUCKET_RETRY_MS = { first: 1000, most: 30_000 };

/** The operations of a KV that reach its stream: each is put right once when the stream is gone. */
const OPERATIONS: ReadonlySet<PropertyKey> = new Set([
  "get",
  "put",
  "create",
  "update",
  "delete",
  "purge",
  "purgeDeletes",
  "keys",
  "history",
  "watch",
  "status",
]);

const streamNotFound = (error: unknown) =>
  error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound;

/**
 * A write no stream captured: the server's "no responders" for the `$KV.<bucket>.<key>` subject,
 * which the client reports as JetStreamNotEnabled with the RequestError as its cause. JetStream
 * away altogether looks the same, so the bucket's stream is asked about before it counts as gone.
 */
const nothingCaptured = (error: unknown) =>
  error instanceof Error && error.cause instanceof RequestError && error.cause.isNoResponders();

export interface BucketRepair {
  /** The view of `kv` (the bucket `bucket` on the server) that puts the bucket back when its stream is gone. */
  view(bucket: string, kv: KV): KV;
}

/**
 * KV views that survive their bucket's stream being lost (a nats-server restart loses every
 * memory bucket while the file streams stay, so nothing else notices; an operator may delete
 * one). An operation that finds the stream gone (JetStream's stream not found, or a write no
 * stream captured while the bucket's stream info says it is not there) has the declared topology
 * put back by `restore` (ensureTopology: created where the role may, checked where it may not)
 * and is tried once more. A bucket that cannot be put back fails its operations with
 * BucketMissingError, at once and without asking the server until the next attempt is due
 * (BUCKET_RETRY_MS), so a process that works without it neither crashes nor spins. One attempt
 * runs at a time for the whole connection, however many operations and buckets wait for it.
 */
export function bucketRepair(options: {
  restore: () => Promise<unknown>;
  /** Whether the stream exists: false only when JetStream says it is not found. */
  streamExists: (stream: string) => Promise<boolean>;
  onEvent: (event: BucketEvent) => void;
  retryMs?: { first: number; most: number };
  now?: () => number;
}): BucketRepair {
  const retryMs = options.retryMs ?? BUCKET_RETRY_MS;
  const now = options.now ?? Date.now;
  let repairing: Promise<void> | undefined;
  let failures = 0;
  let retryAt = 0;
  let lastFailure: unknown;
  /** Buckets found gone and not put back: their operations fail at once until `retryAt`. */
  const missing = new Set<string>();

  const repair = (): Promise<void> => {
    if (repairing !== undefined) return repairing;
    // Within the pause after a failed attempt, the bucket is as the attempt left it.
    if (now() < retryAt) return Promise.reject(lastFailure);
    repairing = options
      .restore()
      .then(
        () => {
          failures = 0;
          retryAt = 0;
          lastFailure = undefined;
        },
        (error: unknown) => {
          failures++;
          retryAt = now() + Math.min(retryMs.most, retryMs.first * 2 ** (failures - 1));
          lastFailure = error;
          throw error;
        },
      )
      .finally(() => {
        repairing = undefined;
      });
    return repairing;
  };

  const gone = async (bucket: string, error: unknown): Promise<boolean> => {
    if (streamNotFound(error)) return true;
    if (!nothingCaptured(error)) return false;
    return options.streamExists(`KV_${bucket}`).then(
      (exists) => !exists,
      () => false,
    );
  };

  const answered = (bucket: string) => {
    if (missing.delete(bucket)) options.onEvent({ bucket, state: "restored" });
  };

  async function run<T>(bucket: string, operation: () => Promise<T>): Promise<T> {
    if (missing.has(bucket) && now() < retryAt) throw new BucketMissingError(bucket, lastFailure);
    try {
      const result = await operation();
      answered(bucket);
      return result;
    } catch (error) {
      if (!(await gone(bucket, error))) throw error;
      const first = repairing === undefined;
      try {
        await repair();
      } catch (failure) {
        if (!missing.has(bucket)) {
          missing.add(bucket);
          options.onEvent({ bucket, state: "missing", error: failure });
        }
        throw new BucketMissingError(bucket, failure);
      }
      // Said once per attempt, by the operation that started it (and for a bucket that was missing).
      if (first && !missing.has(bucket)) options.onEvent({ bucket, state: "restored" });
      answered(bucket);
      return operation();
    }
  }

  return {
    view(bucket, kv) {
      const wrapped = new Map<PropertyKey, unknown>();
      return new Proxy(kv, {
        get(target, property) {
          const known = wrapped.get(property);
          if (known !== undefined) return known;
          const value: unknown = Reflect.get(target, property);
          if (typeof value !== "function") return value;
          const method = value as (...args: unknown[]) => unknown;
          const fn = OPERATIONS.has(property)
            ? (...args: unknown[]) => run(bucket, async () => method.apply(target, args))
            : method.bind(target);
          wrapped.set(property, fn);
          return fn;
        },
      });
    },
  };
}
