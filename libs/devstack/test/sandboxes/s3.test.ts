import {
  CreateBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from "@aws-sdk/client-s3";
import t from "tap";
import { startS3Sandbox } from "../../src/index.js";

// The S3 sandbox against the real AWS SDK: S3's REST protocol, SigV4 checked against one key.
const ACCESS_KEY_ID = "AKIASANDBOX000000000";
const SECRET = "sandbox-secret-access-key";
const sandbox = await startS3Sandbox({ accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET, buckets: ["archive"] });
t.teardown(() => sandbox.close());
t.beforeEach(() => sandbox.reset());

const client = (overrides: { secret?: string; accessKeyId?: string; region?: string } = {}) => {
  const s3 = new S3Client({
    endpoint: sandbox.url,
    forcePathStyle: true,
    region: overrides.region ?? "us-east-1",
    credentials: { accessKeyId: overrides.accessKeyId ?? ACCESS_KEY_ID, secretAccessKey: overrides.secret ?? SECRET },
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });
  t.teardown(() => s3.destroy());
  return s3;
};
const s3 = client();

/** The S3 error an SDK call failed with: its code and HTTP status. */
async function failure(call: Promise<unknown>): Promise<{ name: string; status: number | undefined }> {
  try {
    await call;
  } catch (error) {
    if (error instanceof S3ServiceException) return { name: error.name, status: error.$metadata.httpStatusCode };
    throw error;
  }
  throw new Error("the call succeeded");
}

t.test("put, get, head, delete: bytes, type and ETag round trip", async (t) => {
  const body = Buffer.from("hello, archive\n");
  const put = await s3.send(
    new PutObjectCommand({
      Bucket: "archive",
      Key: "2025/01/31/a b+c.ndjson.gz",
      Body: body,
      ContentType: "application/gzip",
    }),
  );
  t.match(put.ETag, /^"[0-9a-f]{32}"$/);
  const got = await s3.send(new GetObjectCommand({ Bucket: "archive", Key: "2025/01/31/a b+c.ndjson.gz" }));
  t.same(Buffer.from(await (got.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray()), body);
  t.equal(got.ContentType, "application/gzip");
  t.equal(got.ETag, put.ETag);
  const head = await s3.send(new HeadObjectCommand({ Bucket: "archive", Key: "2025/01/31/a b+c.ndjson.gz" }));
  t.equal(head.ContentLength, body.length);
  const ranged = await s3.send(
    new GetObjectCommand({ Bucket: "archive", Key: "2025/01/31/a b+c.ndjson.gz", Range: "bytes=7-13" }),
  );
  t.equal(await (ranged.Body as { transformToString(): Promise<string> }).transformToString(), "archive");
  t.same(
    sandbox.objects("archive").map((o) => o.key),
    ["2025/01/31/a b+c.ndjson.gz"],
  );

  await s3.send(new DeleteObjectCommand({ Bucket: "archive", Key: "2025/01/31/a b+c.ndjson.gz" }));
  t.same(await failure(s3.send(new GetObjectCommand({ Bucket: "archive", Key: "2025/01/31/a b+c.ndjson.gz" }))), {
    name: "NoSuchKey",
    status: 404,
  });
  t.same(await failure(s3.send(new HeadObjectCommand({ Bucket: "archive", Key: "nothing" }))), {
    name: "NotFound",
    status: 404,
  });
  await s3.send(new DeleteObjectCommand({ Bucket: "archive", Key: "nothing" }));
  t.same(await failure(s3.send(new GetObjectCommand({ Bucket: "nope-bucket", Key: "x" }))), {
    name: "NoSuchBucket",
    status: 404,
  });
});

t.test("ListObjectsV2: prefix, delimiter and pages in key order", async (t) => {
  const keys = ["2025-01/old.ndjson.gz", "2025/01/30/a", "2025/01/31/b", "2025/01/31/c", "2025/02/01/d", "other/e"];
  for (const key of [...keys].reverse())
    await s3.send(new PutObjectCommand({ Bucket: "archive", Key: key, Body: key }));

  const listed: string[] = [];
  let token: string | undefined;
  let pages = 0;
  do {
    const page = await s3.send(
      new ListObjectsV2Command({ Bucket: "archive", Prefix: "2025", MaxKeys: 2, ContinuationToken: token }),
    );
    pages++;
    listed.push(...(page.Contents ?? []).map((o) => o.Key as string));
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token !== undefined);
  t.same(listed, keys.slice(0, 5), "every key under the prefix once, in order ('-' sorts before '/')");
  t.equal(pages, 3);

  const folders = await s3.send(new ListObjectsV2Command({ Bucket: "archive", Prefix: "2025/01/", Delimiter: "/" }));
  t.same(
    folders.CommonPrefixes?.map((p) => p.Prefix),
    ["2025/01/30/", "2025/01/31/"],
  );
  t.equal(folders.Contents, undefined);
  const paged = await s3.send(
    new ListObjectsV2Command({ Bucket: "archive", Prefix: "2025/", Delimiter: "/", MaxKeys: 1 }),
  );
  t.same(
    paged.CommonPrefixes?.map((p) => p.Prefix),
    ["2025/01/"],
  );
  const next = await s3.send(
    new ListObjectsV2Command({
      Bucket: "archive",
      Prefix: "2025/",
      Delimiter: "/",
      MaxKeys: 1,
      ContinuationToken: paged.NextContinuationToken,
    }),
  );
  t.same(
    next.CommonPrefixes?.map((p) => p.Prefix),
    ["2025/02/"],
    "a page after a common prefix skips the keys under it",
  );
  t.equal(next.IsTruncated, false);
});

t.test("a request signed with the wrong secret fails as S3 fails it", async (t) => {
  t.same(
    await failure(
      client({ secret: "not-the-secret" }).send(new PutObjectCommand({ Bucket: "archive", Key: "x", Body: "x" })),
    ),
    { name: "SignatureDoesNotMatch", status: 403 },
  );
  t.same(await failure(client({ secret: "not-the-secret" }).send(new ListObjectsV2Command({ Bucket: "archive" }))), {
    name: "SignatureDoesNotMatch",
    status: 403,
  });
  t.same(sandbox.objects(), [], "nothing stored");
  t.same(
    await failure(
      client({ accessKeyId: "AKIAUNKNOWN000000000" }).send(new ListObjectsV2Command({ Bucket: "archive" })),
    ),
    { name: "InvalidAccessKeyId", status: 403 },
  );
  t.same(await failure(client({ region: "eu-west-1" }).send(new ListObjectsV2Command({ Bucket: "archive" }))), {
    name: "AuthorizationHeaderMalformed",
    status: 400,
  });
});

t.test("a body changed after signing is refused; so is an unsigned request", async (t) => {
  const tampering = client();
  tampering.middlewareStack.add(
    (next) => async (args) => {
      const request = args.request as { body?: unknown };
      if (Buffer.isBuffer(request.body) || request.body instanceof Uint8Array) request.body = Buffer.from("HELLO");
      return next(args);
    },
    { step: "deserialize", name: "tamper" },
  );
  t.same(
    await failure(tampering.send(new PutObjectCommand({ Bucket: "archive", Key: "x", Body: Buffer.from("hello") }))),
    {
      name: "XAmzContentSHA256Mismatch",
      status: 400,
    },
  );
  t.same(sandbox.objects(), []);

  const anonymous = await fetch(`${sandbox.url}/archive?list-type=2`);
  t.equal(anonymous.status, 403);
  t.equal(anonymous.headers.get("content-type"), "application/xml");
  t.match(await anonymous.text(), /<Error><Code>AccessDenied<\/Code><Message>Access Denied<\/Message>.*<RequestId>/);
});

t.test("buckets: create, and errors for what is not implemented", async (t) => {
  await s3.send(new CreateBucketCommand({ Bucket: "second-bucket" }));
  await s3.send(new PutObjectCommand({ Bucket: "second-bucket", Key: "k", Body: "v" }));
  t.same(
    sandbox.objects("second-bucket").map((o) => o.key),
    ["k"],
  );
  t.same(await failure(s3.send(new CreateBucketCommand({ Bucket: "second-bucket" }))), {
    name: "BucketAlreadyOwnedByYou",
    status: 409,
  });
});
