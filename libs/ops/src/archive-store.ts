import { createReadStream, createWriteStream, type Dirent, mkdirSync, readdirSync, renameSync } from "node:fs";
import { dirname, join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import {
  GetObjectCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
  S3ServiceException,
} from "@aws-sdk/client-s3";
import { type ArchiveTarget, formatArchiveLocation } from "@notify/config";

/**
 * Where archive objects live: keys are `/`-separated paths relative to the archive's root (a
 * folder, or a bucket's prefix), e.g. `2025/01/31/20250430T120000000Z-<id>.ndjson.gz`.
 */
export interface ArchiveStore {
  /** The folder or s3://bucket/prefix, for messages and logs (it never holds a secret). */
  readonly location: string;
  /** Stores `body` under `key` whole or not at all: a reader never sees part of an object. */
  put(key: string, body: Uint8Array, contentType: string): Promise<void>;
  /** The keys that start with `prefix`, in ascending order, read a page at a time. */
  list(prefix: string): AsyncIterable<string>;
  /** The object's bytes as a stream; ArchiveStoreError when it is not there. */
  get(key: string): Promise<Readable>;
  /** Lets go of connections (an S3 client's sockets). */
  close(): void;
}

/** A store operation that failed, naming the object; never carries a credential. */
export class ArchiveStoreError extends Error {
  readonly key: string;
  constructor(message: string, key: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ArchiveStoreError";
    this.key = key;
  }
}

/** The store ARCHIVE_URL / ARCHIVE_DIR (and ARCHIVE_S3_*) name. */
export function openArchiveStore(target: ArchiveTarget): ArchiveStore {
  const { location } = target;
  if (location.kind === "folder") return folderStore(location.path);
  return s3Store({
    bucket: location.bucket,
    prefix: location.prefix,
    ...(target.endpoint === undefined ? {} : { endpoint: target.endpoint }),
    region: target.region,
  });
}

/**
 * A folder: each key a file under it. A file is written under a `.partial` name and renamed once
 * complete, so a file under its final name is complete (a crash leaves only a `.partial`, which
 * `list` skips).
 */
export function folderStore(dir: string): ArchiveStore {
  const pathOf = (key: string) => join(dir, ...key.split("/"));
  return {
    location: dir,
    async put(key, body) {
      const file = pathOf(key);
      mkdirSync(dirname(file), { recursive: true });
      const partial = `${file}.partial`;
      await pipeline(Readable.from([body]), createWriteStream(partial, { flush: true }));
      renameSync(partial, file);
    },
    async *list(prefix) {
      // Walk from the deepest folder the prefix names in full.
      const cut = prefix.lastIndexOf("/");
      const base = cut === -1 ? "" : prefix.slice(0, cut + 1);
      yield* walk(dir, base, prefix);
    },
    async get(key) {
      const stream = createReadStream(pathOf(key));
      await new Promise<void>((resolve, reject) => {
        stream.once("open", () => resolve());
        stream.once("error", (error: NodeJS.ErrnoException) =>
          reject(
            error.code === "ENOENT"
              ? new ArchiveStoreError(`archive object ${join(dir, key)} is missing`, key)
              : new ArchiveStoreError(`archive object ${join(dir, key)} cannot be read: ${error.message}`, key, {
                  cause: error,
                }),
          ),
        );
      });
      return stream;
    },
    close() {},
  };
}

/** Keys under `dir/<base>` starting with `prefix`, ascending, `.partial` files left out. */
function* walk(dir: string, base: string, prefix: string): Generator<string> {
  let entries: Dirent[];
  try {
    entries = readdirSync(join(dir, ...base.split("/").filter(Boolean)), { withFileTypes: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT" || (error as NodeJS.ErrnoException).code === "ENOTDIR") {
      return;
    }
    throw error;
  }
  // A folder's keys go on with "/": sorting by that key keeps the walk in key order.
  const named = entries.map((entry) => ({ entry, key: `${base}${entry.name}${entry.isDirectory() ? "/" : ""}` }));
  named.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  for (const { entry, key } of named) {
    if (entry.isDirectory()) {
      if (key.startsWith(prefix) || prefix.startsWith(key)) yield* walk(dir, key, prefix);
    } else if (!entry.name.endsWith(".partial") && key.startsWith(prefix)) {
      yield key;
    }
  }
}

export interface S3StoreOptions {
  bucket: string;
  /** Key prefix, without leading or trailing "/"; "" for the bucket's root. */
  prefix: string;
  /** An S3-compatible endpoint (MinIO, R2, the sandbox): path-style addressing then. */
  endpoint?: string;
  /** The region requests are signed for; unset: us-east-1. */
  region?: string;
  /** For tests; unset: the SDK's chain (environment, profile, role). */
  credentials?: S3ClientConfig["credentials"];
}

/**
 * A bucket (and a prefix in it) of S3 or an S3-compatible store. PutObject is atomic: an object
 * exists whole or not at all. Credentials come from the SDK's chain and are never logged: errors
 * carry the S3 error code and message, which name no secret.
 */
export function s3Store(options: S3StoreOptions): ArchiveStore {
  const client = new S3Client({
    region: options.region ?? "us-east-1",
    ...(options.endpoint ? { endpoint: options.endpoint, forcePathStyle: true } : {}),
    ...(options.credentials ? { credentials: options.credentials } : {}),
    // Checksums only where S3 requires them: several S3-compatible stores reject the SDK's
    // default CRC32 headers, and the manifest carries each object's sha256 anyway.
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });
  const location = formatArchiveLocation({ kind: "s3", bucket: options.bucket, prefix: options.prefix });
  const full = (key: string) => (options.prefix === "" ? key : `${options.prefix}/${key}`);
  const strip = options.prefix === "" ? 0 : options.prefix.length + 1;
  const failure = (operation: string, key: string, error: unknown) => {
    const what = `${location}/${key}`;
    if (error instanceof S3ServiceException) {
      if (error.name === "NoSuchKey") return new ArchiveStoreError(`archive object ${what} is missing`, key);
      return new ArchiveStoreError(
        `${operation} ${what} failed: ${error.name} (HTTP ${error.$metadata.httpStatusCode ?? "?"}): ${error.message}`,
        key,
        { cause: error },
      );
    }
    return new ArchiveStoreError(`${operation} ${what} failed: ${(error as Error).message}`, key, { cause: error });
  };
  return {
    location,
    async put(key, body, contentType) {
      try {
        await client.send(
          new PutObjectCommand({ Bucket: options.bucket, Key: full(key), Body: body, ContentType: contentType }),
        );
      } catch (error) {
        throw failure("writing", key, error);
      }
    },
    async *list(prefix) {
      let token: string | undefined;
      do {
        let page: ListObjectsV2CommandOutput;
        try {
          page = await client.send(
            new ListObjectsV2Command({
              Bucket: options.bucket,
              Prefix: full(prefix),
              ...(token === undefined ? {} : { ContinuationToken: token }),
            }),
          );
        } catch (error) {
          throw failure("listing", prefix, error);
        }
        for (const object of page.Contents ?? []) if (object.Key !== undefined) yield object.Key.slice(strip);
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token !== undefined);
    },
    async get(key) {
      try {
        const answer = await client.send(new GetObjectCommand({ Bucket: options.bucket, Key: full(key) }));
        if (!(answer.Body instanceof Readable)) throw new Error("the answer has no body");
        return answer.Body;
      } catch (error) {
        throw failure("reading", key, error);
      }
    },
    close() {
      client.destroy();
    },
  };
}
