import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { type Context, Hono } from "hono";
import { serveApp } from "./serve.js";

/**
 * An S3-compatible object store for tests and development, speaking S3's REST protocol as the
 * AWS SDK and other S3 clients use it: path-style addressing (`<url>/<bucket>/<key>`), every
 * request authenticated by an AWS Signature Version 4 Authorization header checked against one
 * configured key (a wrong secret answers 403 SignatureDoesNotMatch, as S3 does), payload hashes
 * checked, XML errors in S3's shape. It serves PutObject, GetObject (with a byte range),
 * HeadObject, DeleteObject, ListObjectsV2, and CreateBucket, HeadBucket, DeleteBucket,
 * ListBuckets; anything else answers 501 NotImplemented. Objects live in memory.
 *
 * There are no `/sandbox/*` control routes, unlike the other sandboxes: every path is S3's
 * (a bucket may be called `sandbox`). Tests use `objects()`, `body()` and `reset()` instead.
 */
export interface S3SandboxOptions {
  accessKeyId: string;
  secretAccessKey: string;
  /** The region requests must be signed for; us-east-1 when unset. */
  region?: string;
  /** Buckets that exist from the start. */
  buckets?: string[];
  /** The largest object PutObject takes (EntityTooLarge above it); 64 MiB when unset. */
  maxObjectBytes?: number;
}

/** One stored object, as ListObjectsV2 describes it. */
export interface S3SandboxObject {
  bucket: string;
  key: string;
  size: number;
  etag: string;
  content_type: string;
  last_modified: string;
}

export interface S3Sandbox {
  readonly app: Hono;
  /** The objects of one bucket (or of all), in key order. */
  objects(bucket?: string): S3SandboxObject[];
  /** An object's bytes, or undefined. */
  body(bucket: string, key: string): Buffer | undefined;
  /** Forgets every object; the buckets stay. */
  reset(): void;
}

export interface RunningS3Sandbox extends S3Sandbox {
  /** The endpoint for an S3 client (`endpoint`, with path-style addressing), e.g. http://127.0.0.1:54321 */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

interface StoredObject {
  body: Buffer;
  contentType: string;
  etag: string;
  lastModified: Date;
  metadata: Record<string, string>;
}

interface Bucket {
  created: Date;
  objects: Map<string, StoredObject>;
}

const NS = "http://s3.amazonaws.com/doc/2006-03-01/";
const EMPTY_SHA256 = createHash("sha256").update("").digest("hex");
const MAX_SKEW_MS = 15 * 60_000;
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

const sha256 = (data: string | Buffer) => createHash("sha256").update(data).digest("hex");
const hmac = (key: Buffer | string, data: string) => createHmac("sha256", key).update(data).digest();

/** SigV4's URI encoding: every byte but A-Z a-z 0-9 - _ . ~ as %XX, upper-case hex. */
export const awsUriEncode = (value: string): string =>
  encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

const xmlEscape = (value: string) =>
  value.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" })[c] as string,
  );

const element = (name: string, value: string | number | boolean) => `<${name}>${xmlEscape(String(value))}</${name}>`;

/** UTF-8 byte order, which is S3's key order. */
const byKey = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

class S3Error extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, string> = {},
  ) {
    super(message);
  }
}

const decode = (value: string): string => {
  try {
    return decodeURIComponent(value);
  } catch {
    throw new S3Error(400, "InvalidURI", "Couldn't parse the specified URI.");
  }
};

/** A request's raw path and query as sent (S3 signs what the client encoded, not a normalized URL). */
function rawTarget(c: Context): { path: string; query: string } {
  const incoming = (c.env as { incoming?: { url?: string } } | undefined)?.incoming?.url;
  const target = incoming ?? `${new URL(c.req.url).pathname}${new URL(c.req.url).search}`;
  const q = target.indexOf("?");
  return q === -1 ? { path: target, query: "" } : { path: target.slice(0, q), query: target.slice(q + 1) };
}

function queryPairs(query: string): Array<[string, string]> {
  if (query === "") return [];
  return query
    .split("&")
    .filter((part) => part !== "")
    .map((part) => {
      const eq = part.indexOf("=");
      return eq === -1 ? [decode(part), ""] : [decode(part.slice(0, eq)), decode(part.slice(eq + 1))];
    });
}

interface Authorization {
  accessKeyId: string;
  date: string;
  region: string;
  service: string;
  terminator: string;
  signedHeaders: string[];
  signature: string;
}

function parseAuthorization(header: string): Authorization {
  const malformed = () =>
    new S3Error(
      400,
      "AuthorizationHeaderMalformed",
      "The authorization header is malformed; the Credential is mal-formed.",
    );
  const match = /^AWS4-HMAC-SHA256\s+(.*)$/s.exec(header);
  if (!match) {
    throw new S3Error(
      400,
      "InvalidRequest",
      "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.",
    );
  }
  const fields = new Map(
    (match[1] as string).split(",").map((part) => {
      const eq = part.indexOf("=");
      return [part.slice(0, eq).trim(), part.slice(eq + 1).trim()] as const;
    }),
  );
  const credential = fields.get("Credential")?.split("/");
  const signedHeaders = fields.get("SignedHeaders");
  const signature = fields.get("Signature");
  if (credential?.length !== 5 || !signedHeaders || !signature || !/^[0-9a-f]{64}$/.test(signature)) throw malformed();
  const [accessKeyId, date, region, service, terminator] = credential as [string, string, string, string, string];
  return {
    accessKeyId,
    date,
    region,
    service,
    terminator,
    signedHeaders: signedHeaders.split(";"),
    signature,
  };
}

/**
 * S3's subresources (?acl, ?uploads, ?versionId, ...): this sandbox has none of them, and says
 * so rather than answer as if the plain operation was asked. Other parameters (the SDK's
 * ?x-id=PutObject) are ignored, as S3 ignores them.
 */
const SUBRESOURCES = new Set([
  "accelerate",
  "acl",
  "analytics",
  "attributes",
  "cors",
  "delete",
  "encryption",
  "intelligent-tiering",
  "inventory",
  "legal-hold",
  "lifecycle",
  "location",
  "logging",
  "metrics",
  "notification",
  "object-lock",
  "ownershipControls",
  "partNumber",
  "policy",
  "policyStatus",
  "publicAccessBlock",
  "replication",
  "requestPayment",
  "restore",
  "retention",
  "select",
  "tagging",
  "torrent",
  "uploadId",
  "uploads",
  "versionId",
  "versioning",
  "versions",
  "website",
]);

function notImplemented(params: Map<string, string>): void {
  for (const name of params.keys()) {
    if (SUBRESOURCES.has(name))
      throw new S3Error(501, "NotImplemented", `?${name} is not implemented by this sandbox.`);
  }
}

/** `20250131T120000Z` as a Date, or undefined. */
function amzDate(value: string | undefined): Date | undefined {
  const m = value === undefined ? null : /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(value);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s] = m.map(Number) as number[];
  return new Date(Date.UTC(y as number, (mo as number) - 1, d, h, mi, s));
}

export function createS3Sandbox(options: S3SandboxOptions): S3Sandbox {
  const region = options.region ?? "us-east-1";
  const maxBytes = options.maxObjectBytes ?? 64 * 1024 * 1024;
  const buckets = new Map<string, Bucket>();
  for (const name of options.buckets ?? []) buckets.set(name, { created: new Date(), objects: new Map() });

  /** Checks the request's SigV4 signature and payload hash; throws S3's error when either is wrong. */
  const authenticate = (c: Context, path: string, query: string, body: Buffer): void => {
    const header = c.req.header("authorization");
    if (header === undefined) {
      if (/(^|&)X-Amz-Signature=/i.test(query)) {
        throw new S3Error(501, "NotImplemented", "Presigned URLs are not implemented by this sandbox.");
      }
      throw new S3Error(403, "AccessDenied", "Access Denied");
    }
    const auth = parseAuthorization(header);
    if (auth.accessKeyId !== options.accessKeyId) {
      throw new S3Error(
        403,
        "InvalidAccessKeyId",
        "The AWS Access Key Id you provided does not exist in our records.",
        {
          AWSAccessKeyId: auth.accessKeyId,
        },
      );
    }
    const dateHeader = c.req.header("x-amz-date");
    const when = amzDate(dateHeader);
    if (dateHeader === undefined || when === undefined) {
      throw new S3Error(403, "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header");
    }
    if (Math.abs(Date.now() - when.getTime()) > MAX_SKEW_MS) {
      throw new S3Error(
        403,
        "RequestTimeTooSkewed",
        "The difference between the request time and the current time is too large.",
        {
          RequestTime: dateHeader,
          ServerTime: new Date().toISOString(),
        },
      );
    }
    if (auth.region !== region) {
      throw new S3Error(
        400,
        "AuthorizationHeaderMalformed",
        `The authorization header is malformed; the region '${auth.region}' is wrong; expecting '${region}'`,
        { Region: region },
      );
    }
    if (auth.date !== dateHeader.slice(0, 8) || auth.service !== "s3" || auth.terminator !== "aws4_request") {
      throw new S3Error(
        400,
        "AuthorizationHeaderMalformed",
        "The authorization header is malformed; the Credential is mal-formed.",
      );
    }
    if (!auth.signedHeaders.includes("host")) {
      throw new S3Error(
        400,
        "AuthorizationHeaderMalformed",
        "The authorization header is malformed; host must be signed.",
      );
    }
    const unsigned = Object.keys(c.req.header()).filter(
      (name) => name.startsWith("x-amz-") && !auth.signedHeaders.includes(name),
    );
    if (unsigned.length > 0) {
      throw new S3Error(403, "AccessDenied", "There were headers present in the request which were not signed", {
        HeadersNotSigned: unsigned.join(", "),
      });
    }
    const payloadHash = c.req.header("x-amz-content-sha256");
    if (payloadHash === undefined) {
      throw new S3Error(400, "InvalidRequest", "Missing required header for this request: x-amz-content-sha256");
    }
    if (payloadHash.startsWith("STREAMING-")) {
      throw new S3Error(501, "NotImplemented", "Chunked (streaming) uploads are not implemented by this sandbox.");
    }
    if (payloadHash !== "UNSIGNED-PAYLOAD") {
      if (!/^[0-9a-f]{64}$/.test(payloadHash)) {
        throw new S3Error(400, "InvalidArgument", "x-amz-content-sha256 must be UNSIGNED-PAYLOAD or a hex SHA-256.");
      }
      const actual = body.length === 0 ? EMPTY_SHA256 : sha256(body);
      if (actual !== payloadHash) {
        throw new S3Error(
          400,
          "XAmzContentSHA256Mismatch",
          "The provided 'x-amz-content-sha256' header does not match what was computed.",
          {
            ClientComputedContentSHA256: payloadHash,
            S3ComputedContentSHA256: actual,
          },
        );
      }
    }
    const canonicalUri = path
      .split("/")
      .map((segment) => awsUriEncode(decode(segment)))
      .join("/");
    const canonicalQuery = queryPairs(query)
      .map(([k, v]) => [awsUriEncode(k), awsUriEncode(v)] as const)
      .sort(([ak, av], [bk, bv]) => (ak < bk ? -1 : ak > bk ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
      .map(([k, v]) => `${k}=${v}`)
      .join("&");
    const canonicalHeaders = auth.signedHeaders
      .map((name) => `${name}:${(c.req.header(name) ?? "").trim().replace(/\s+/g, " ")}\n`)
      .join("");
    const canonicalRequest = [
      c.req.method,
      canonicalUri,
      canonicalQuery,
      canonicalHeaders,
      auth.signedHeaders.join(";"),
      payloadHash,
    ].join("\n");
    const scope = `${auth.date}/${auth.region}/${auth.service}/${auth.terminator}`;
    const stringToSign = ["AWS4-HMAC-SHA256", dateHeader, scope, sha256(canonicalRequest)].join("\n");
    const key = hmac(hmac(hmac(hmac(`AWS4${options.secretAccessKey}`, auth.date), auth.region), "s3"), "aws4_request");
    const expected = hmac(key, stringToSign);
    if (!timingSafeEqual(expected, Buffer.from(auth.signature, "hex"))) {
      throw new S3Error(
        403,
        "SignatureDoesNotMatch",
        "The request signature we calculated does not match the signature you provided. Check your key and signing method.",
        { AWSAccessKeyId: auth.accessKeyId, StringToSign: stringToSign, CanonicalRequest: canonicalRequest },
      );
    }
  };

  const bucketOf = (name: string): Bucket => {
    const bucket = buckets.get(name);
    if (!bucket) throw new S3Error(404, "NoSuchBucket", "The specified bucket does not exist", { BucketName: name });
    return bucket;
  };

  const objectHeaders = (object: StoredObject): Record<string, string> => ({
    "Content-Type": object.contentType,
    ETag: `"${object.etag}"`,
    "Last-Modified": object.lastModified.toUTCString(),
    "Accept-Ranges": "bytes",
    ...Object.fromEntries(Object.entries(object.metadata).map(([k, v]) => [`x-amz-meta-${k}`, v])),
  });

  const putObject = (c: Context, bucket: Bucket, key: string, body: Buffer): Response => {
    if (c.req.header("x-amz-copy-source") !== undefined) {
      throw new S3Error(501, "NotImplemented", "CopyObject is not implemented by this sandbox.");
    }
    const md5 = c.req.header("content-md5");
    if (md5 !== undefined && createHash("md5").update(body).digest("base64") !== md5) {
      throw new S3Error(400, "BadDigest", "The Content-MD5 you specified did not match what we received.");
    }
    const checksum = c.req.header("x-amz-checksum-sha256");
    if (checksum !== undefined && createHash("sha256").update(body).digest("base64") !== checksum) {
      throw new S3Error(400, "BadDigest", "The SHA256 you specified did not match the calculated checksum.");
    }
    const metadata: Record<string, string> = {};
    for (const [name, value] of Object.entries(c.req.header())) {
      if (name.startsWith("x-amz-meta-")) metadata[name.slice("x-amz-meta-".length)] = value;
    }
    const object: StoredObject = {
      body,
      contentType: c.req.header("content-type") ?? "binary/octet-stream",
      etag: createHash("md5").update(body).digest("hex"),
      lastModified: new Date(Math.floor(Date.now() / 1000) * 1000),
      metadata,
    };
    bucket.objects.set(key, object);
    return c.body(null, 200, { ETag: `"${object.etag}"` });
  };

  const getObject = (c: Context, bucket: Bucket, key: string, head: boolean): Response => {
    const object = bucket.objects.get(key);
    if (!object) throw new S3Error(404, "NoSuchKey", "The specified key does not exist.", { Key: key });
    const headers = objectHeaders(object);
    const range = c.req.header("range");
    const size = object.body.length;
    let start = 0;
    let end = size - 1;
    let status: 200 | 206 = 200;
    if (range !== undefined) {
      const m = /^bytes=(\d*)-(\d*)$/.exec(range.trim());
      if (m && (m[1] !== "" || m[2] !== "")) {
        if (m[1] === "") {
          start = Math.max(0, size - Number(m[2]));
        } else {
          start = Number(m[1]);
          if (m[2] !== "") end = Math.min(end, Number(m[2]));
        }
        if (start >= size || start > end) {
          throw new S3Error(416, "InvalidRange", "The requested range is not satisfiable", {
            RangeRequested: range,
            ActualObjectSize: String(size),
          });
        }
        status = 206;
        headers["Content-Range"] = `bytes ${start}-${end}/${size}`;
      }
    }
    const slice = object.body.subarray(start, end + 1);
    headers["Content-Length"] = String(slice.length);
    return head ? c.body(null, status, headers) : c.body(new Uint8Array(slice), status, headers);
  };

  const listObjectsV2 = (c: Context, name: string, bucket: Bucket, params: Map<string, string>): Response => {
    const prefix = params.get("prefix") ?? "";
    const delimiter = params.get("delimiter") ?? "";
    const encoding = params.get("encoding-type");
    if (encoding !== undefined && encoding !== "url") {
      throw new S3Error(400, "InvalidArgument", "Invalid Encoding Method specified in Request");
    }
    const maxKeysText = params.get("max-keys") ?? "1000";
    if (!/^\d+$/.test(maxKeysText))
      throw new S3Error(400, "InvalidArgument", "Provided max-keys not an integer or within integer range");
    const maxKeys = Math.min(Number(maxKeysText), 1000);
    const token = params.get("continuation-token");
    let after = params.get("start-after") ?? "";
    let skipPrefix: string | undefined;
    if (token !== undefined) {
      try {
        const marker = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as { k?: unknown; cp?: unknown };
        if (typeof marker.k !== "string") throw new Error("bad token");
        after = marker.k;
        if (marker.cp === true) skipPrefix = marker.k;
      } catch {
        throw new S3Error(400, "InvalidArgument", "The continuation token provided is incorrect");
      }
    }
    const out = (value: string) => (encoding === "url" ? awsUriEncode(value).replace(/%2F/g, "/") : value);
    const contents: string[] = [];
    const commonPrefixes: string[] = [];
    let count = 0;
    let truncated = false;
    let last: { k: string; cp: boolean } | undefined;
    const keys = [...bucket.objects.keys()].filter((k) => k.startsWith(prefix) && byKey(k, after) > 0).sort(byKey);
    for (const key of keys) {
      if (skipPrefix !== undefined && key.startsWith(skipPrefix)) continue;
      const rest = key.slice(prefix.length);
      const cut = delimiter === "" ? -1 : rest.indexOf(delimiter);
      const common = cut === -1 ? undefined : prefix + rest.slice(0, cut + delimiter.length);
      if (common !== undefined && common === last?.k && last.cp) continue;
      if (count === maxKeys) {
        truncated = true;
        break;
      }
      count++;
      if (common !== undefined) {
        commonPrefixes.push(`<CommonPrefixes>${element("Prefix", out(common))}</CommonPrefixes>`);
        last = { k: common, cp: true };
      } else {
        const object = bucket.objects.get(key) as StoredObject;
        contents.push(
          `<Contents>${element("Key", out(key))}${element("LastModified", object.lastModified.toISOString())}${element("ETag", `"${object.etag}"`)}${element("Size", object.body.length)}${element("StorageClass", "STANDARD")}</Contents>`,
        );
        last = { k: key, cp: false };
      }
    }
    const xml = [
      `<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="${NS}">`,
      element("Name", name),
      element("Prefix", out(prefix)),
      ...(delimiter === "" ? [] : [element("Delimiter", out(delimiter))]),
      element("MaxKeys", maxKeys),
      element("KeyCount", count),
      element("IsTruncated", truncated),
      ...(token === undefined ? [] : [element("ContinuationToken", token)]),
      ...(truncated && last
        ? [element("NextContinuationToken", Buffer.from(JSON.stringify(last)).toString("base64url"))]
        : []),
      ...(params.has("start-after") ? [element("StartAfter", out(params.get("start-after") as string))] : []),
      ...(encoding === undefined ? [] : [element("EncodingType", encoding)]),
      ...contents,
      ...commonPrefixes,
      "</ListBucketResult>",
    ].join("");
    return c.body(xml, 200, { "Content-Type": "application/xml" });
  };

  const listBuckets = (c: Context): Response => {
    const entries = [...buckets.entries()]
      .sort(([a], [b]) => byKey(a, b))
      .map(
        ([name, bucket]) =>
          `<Bucket>${element("Name", name)}${element("CreationDate", bucket.created.toISOString())}</Bucket>`,
      );
    const xml = `<?xml version="1.0" encoding="UTF-8"?>\n<ListAllMyBucketsResult xmlns="${NS}"><Owner><ID>sandbox</ID><DisplayName>sandbox</DisplayName></Owner><Buckets>${entries.join("")}</Buckets></ListAllMyBucketsResult>`;
    return c.body(xml, 200, { "Content-Type": "application/xml" });
  };

  const handle = async (c: Context, requestId: string): Promise<Response> => {
    const method = c.req.method;
    const { path, query } = rawTarget(c);
    const declared = c.req.header("content-length");
    if (declared !== undefined && Number(declared) > maxBytes) {
      throw new S3Error(400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size", {
        MaxSizeAllowed: String(maxBytes),
      });
    }
    const body = method === "PUT" || method === "POST" ? Buffer.from(await c.req.arrayBuffer()) : Buffer.alloc(0);
    if (body.length > maxBytes) {
      throw new S3Error(400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size");
    }
    authenticate(c, path, query, body);
    const params = new Map(queryPairs(query));
    const slash = path.indexOf("/", 1);
    const bucketName = decode(slash === -1 ? path.slice(1) : path.slice(1, slash));
    const key = slash === -1 ? "" : decode(path.slice(slash + 1));
    c.header("x-amz-request-id", requestId);

    if (bucketName === "") {
      if (method === "GET") return listBuckets(c);
      throw new S3Error(405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
    }
    if (key === "") {
      notImplemented(params);
      if (method === "PUT") {
        if (!BUCKET_NAME.test(bucketName))
          throw new S3Error(400, "InvalidBucketName", "The specified bucket is not valid.", { BucketName: bucketName });
        if (buckets.has(bucketName)) {
          throw new S3Error(
            409,
            "BucketAlreadyOwnedByYou",
            "Your previous request to create the named bucket succeeded and you already own it.",
            {
              BucketName: bucketName,
            },
          );
        }
        buckets.set(bucketName, { created: new Date(), objects: new Map() });
        return c.body(null, 200, { Location: `/${bucketName}` });
      }
      const bucket = bucketOf(bucketName);
      if (method === "HEAD") return c.body(null, 200, { "x-amz-bucket-region": region });
      if (method === "DELETE") {
        if (bucket.objects.size > 0) {
          throw new S3Error(409, "BucketNotEmpty", "The bucket you tried to delete is not empty", {
            BucketName: bucketName,
          });
        }
        buckets.delete(bucketName);
        return c.body(null, 204);
      }
      if (method === "GET") {
        if (params.get("list-type") !== "2")
          throw new S3Error(
            501,
            "NotImplemented",
            "ListObjects (v1) is not implemented by this sandbox: use ListObjectsV2.",
          );
        return listObjectsV2(c, bucketName, bucket, params);
      }
      throw new S3Error(405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
    }
    notImplemented(params);
    const bucket = bucketOf(bucketName);
    if (key.length > 1024) throw new S3Error(400, "KeyTooLongError", "Your key is too long");
    if (method === "PUT") {
      if (declared === undefined)
        throw new S3Error(411, "MissingContentLength", "You must provide the Content-Length HTTP header.");
      return putObject(c, bucket, key, body);
    }
    if (method === "GET" || method === "HEAD") return getObject(c, bucket, key, method === "HEAD");
    if (method === "DELETE") {
      bucket.objects.delete(key);
      return c.body(null, 204);
    }
    throw new S3Error(405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
  };

  const app = new Hono();
  app.all("*", async (c) => {
    const requestId = randomBytes(8).toString("hex").toUpperCase();
    try {
      return await handle(c, requestId);
    } catch (error) {
      if (!(error instanceof S3Error)) throw error;
      const headers = { "Content-Type": "application/xml", "x-amz-request-id": requestId };
      // A HEAD answer has no body: S3 says only the status.
      if (c.req.method === "HEAD") return c.body(null, error.status as 404, headers);
      const extra = Object.entries(error.extra).map(([name, value]) => element(name, value));
      const xml = `<?xml version="1.0" encoding="UTF-8"?>\n<Error>${element("Code", error.code)}${element("Message", error.message)}${extra.join("")}${element("Resource", rawTarget(c).path)}${element("RequestId", requestId)}</Error>`;
      return c.body(xml, error.status as 404, headers);
    }
  });

  return {
    app,
    objects: (name) =>
      [...buckets.entries()]
        .filter(([bucketName]) => name === undefined || bucketName === name)
        .flatMap(([bucketName, bucket]) =>
          [...bucket.objects.entries()].map(([key, object]) => ({
            bucket: bucketName,
            key,
            size: object.body.length,
            etag: object.etag,
            content_type: object.contentType,
            last_modified: object.lastModified.toISOString(),
          })),
        )
        .sort((a, b) => byKey(a.bucket, b.bucket) || byKey(a.key, b.key)),
    body: (name, key) => buckets.get(name)?.objects.get(key)?.body,
    reset: () => {
      for (const bucket of buckets.values()) bucket.objects.clear();
    },
  };
}

export async function startS3Sandbox(
  options: S3SandboxOptions & { port?: number; host?: string },
): Promise<RunningS3Sandbox> {
  const sandbox = createS3Sandbox(options);
  const host = options.host ?? "127.0.0.1";
  const served = await serveApp(sandbox.app, { host, ...(options.port === undefined ? {} : { port: options.port }) });
  return { ...sandbox, url: `http://${host}:${served.port}`, port: served.port, close: () => served.close() };
}
