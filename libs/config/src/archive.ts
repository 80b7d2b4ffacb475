import { isAbsolute } from "node:path";
import { fileURLToPath } from "node:url";

/** Where archived notifications are kept: a folder, or a bucket (and a key prefix) of an S3-compatible store. */
export type ArchiveLocation = { kind: "folder"; path: string } | { kind: "s3"; bucket: string; prefix: string };

/**
 * A value of ARCHIVE_URL (or `notify retention --url`) that names no archive. Its message never
 * repeats the value: a URL may carry credentials by mistake.
 */
export class ArchiveUrlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ArchiveUrlError";
  }
}

// S3's bucket naming rules (general purpose buckets): 3-63 of a-z, 0-9, '.', '-', starting and
// ending with a letter or digit, no '..', not an IPv4 address.
const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;
// S3's "safe characters" for keys: a prefix of them needs no escaping anywhere it travels.
const PREFIX_SEGMENT = /^[A-Za-z0-9!_.*'()-]+$/;

/**
 * Reads an archive location: `s3://bucket` or `s3://bucket/some/prefix` (a bucket, and the key
 * prefix the archive lives under), `file:///absolute/path`, or a bare path (a folder, relative to
 * the working directory unless absolute). An s3:// URL carries no credentials, port, query or
 * fragment: credentials come from the AWS SDK's standard chain, the endpoint from
 * ARCHIVE_S3_ENDPOINT. Throws ArchiveUrlError.
 */
export function parseArchiveUrl(value: string): ArchiveLocation {
  if (value.trim() === "") throw new ArchiveUrlError("is empty: give a folder, file:///path or s3://bucket/prefix");
  if (value.includes("\0")) throw new ArchiveUrlError("must not contain a NUL character");
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]+):/.exec(value)?.[1]?.toLowerCase();
  if (scheme === undefined) return { kind: "folder", path: value };
  if (scheme === "s3") return parseS3(value);
  if (scheme === "file") return parseFile(value);
  throw new ArchiveUrlError("must be a folder, a file:// URL or an s3:// URL");
}

function parseS3(value: string): ArchiveLocation {
  const match = /^s3:\/\/([^/?#]*)([^?#]*)([?#].*)?$/is.exec(value);
  if (!match) throw new ArchiveUrlError("must be s3://bucket or s3://bucket/prefix");
  const [, authority = "", path = "", rest] = match;
  if (authority.includes("@")) {
    throw new ArchiveUrlError(
      "must not carry credentials: give them the AWS SDK's way (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, a role)",
    );
  }
  if (rest !== undefined) throw new ArchiveUrlError("must not have a query or fragment");
  if (authority.includes(":"))
    throw new ArchiveUrlError("must name a bucket, not a host and port: set ARCHIVE_S3_ENDPOINT");
  if (!BUCKET.test(authority) || authority.includes("..") || IPV4.test(authority)) {
    throw new ArchiveUrlError(
      "must name a bucket: 3-63 of a-z, 0-9, '.' and '-', starting and ending with a letter or digit",
    );
  }
  const segments = path.split("/").filter((segment, i, all) => !(segment === "" && (i === 0 || i === all.length - 1)));
  for (const segment of segments) {
    if (segment === "" || segment === "." || segment === ".." || !PREFIX_SEGMENT.test(segment)) {
      throw new ArchiveUrlError(
        "must have a prefix of non-empty parts of A-Z, a-z, 0-9 and ! _ . * ' ( ) - separated by /, no . or .. parts",
      );
    }
  }
  return { kind: "s3", bucket: authority, prefix: segments.join("/") };
}

function parseFile(value: string): ArchiveLocation {
  // WHATWG URLs would read file:relative as file:///relative: only the full form is taken.
  if (!/^file:\/\//i.test(value)) throw new ArchiveUrlError("must be file:///absolute/path");
  let path: string;
  try {
    const url = new URL(value);
    if (url.search !== "" || url.hash !== "") throw new ArchiveUrlError("must not have a query or fragment");
    if (url.username !== "" || url.password !== "") throw new ArchiveUrlError("a file:// URL carries no credentials");
    if (url.hostname !== "" && url.hostname !== "localhost")
      throw new ArchiveUrlError("a file:// URL names this machine only");
    path = fileURLToPath(url);
  } catch (error) {
    if (error instanceof ArchiveUrlError) throw error;
    throw new ArchiveUrlError("must be file:///absolute/path");
  }
  if (!isAbsolute(path)) throw new ArchiveUrlError("must be file:///absolute/path");
  return { kind: "folder", path };
}

/** The location as a URL again, for messages: never carries a secret (it has none). */
export function formatArchiveLocation(location: ArchiveLocation): string {
  if (location.kind === "folder") return location.path;
  return `s3://${location.bucket}${location.prefix === "" ? "" : `/${location.prefix}`}`;
}

/** The archive settings of a parsed config, resolved: ARCHIVE_URL over ARCHIVE_DIR, empty values as unset. */
export interface ArchiveTarget {
  location: ArchiveLocation;
  /** The S3-compatible endpoint (path-style addressing), when not AWS. */
  endpoint?: string;
  /** The region S3 requests are signed for. */
  region: string;
}

/**
 * Resolves the archive settings of a parsed config: ARCHIVE_URL over ARCHIVE_DIR; the region
 * ARCHIVE_S3_REGION, else the SDK's usual AWS_REGION (or AWS_DEFAULT_REGION) from `env`, else
 * us-east-1.
 */
export function archiveTarget(
  config: {
    ARCHIVE_URL?: ArchiveLocation | undefined;
    ARCHIVE_DIR: string;
    ARCHIVE_S3_ENDPOINT?: string | undefined;
    ARCHIVE_S3_REGION?: string | undefined;
  },
  env: Record<string, string | undefined> = {},
): ArchiveTarget {
  return {
    location: config.ARCHIVE_URL ?? { kind: "folder", path: config.ARCHIVE_DIR },
    ...(config.ARCHIVE_S3_ENDPOINT ? { endpoint: config.ARCHIVE_S3_ENDPOINT } : {}),
    region: config.ARCHIVE_S3_REGION || env.AWS_REGION || env.AWS_DEFAULT_REGION || "us-east-1",
  };
}
