import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import fc from "fast-check";
import t from "tap";
import * as v from "valibot";
import {
  type ArchiveLocation,
  ArchiveUrlError,
  archive,
  archiveTarget,
  ConfigError,
  formatArchiveLocation,
  parseArchiveUrl,
  parseConfig,
} from "../src/index.js";

// ARCHIVE_URL (and `notify retention --url`): a folder, file:///path or s3://bucket/prefix.

const lower = "abcdefghijklmnopqrstuvwxyz0123456789";
const bucket = fc
  .tuple(
    fc.constantFrom(...lower),
    fc.array(fc.constantFrom(...`${lower}-`), { minLength: 1, maxLength: 61 }),
    fc.constantFrom(...lower),
  )
  .map(([a, middle, z]) => `${a}${middle.join("")}${z}`);
const safe = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!_.*'()-";
const segment = fc
  .array(fc.constantFrom(...safe), { minLength: 1, maxLength: 20 })
  .map((chars) => chars.join(""))
  .filter((s) => s !== "." && s !== "..");
const prefix = fc.array(segment, { maxLength: 5 }).map((parts) => parts.join("/"));

t.test("s3://bucket/prefix round-trips, with or without slashes around the prefix", async () => {
  fc.assert(
    fc.property(bucket, prefix, fc.boolean(), fc.constantFrom("s3", "S3"), (b, p, trailing, scheme) => {
      const url = `${scheme}://${b}${p === "" ? "" : `/${p}`}${trailing ? "/" : ""}`;
      const location = parseArchiveUrl(url);
      t.same(location, { kind: "s3", bucket: b, prefix: p });
      t.same(parseArchiveUrl(formatArchiveLocation(location)), location);
    }),
    { numRuns: 500 },
  );
});

t.test("a file:// URL is the folder it names, a bare path is a folder as given", async () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.string({ minLength: 1, maxLength: 12 }).filter((s) => !/[/\0]/.test(s)),
        { minLength: 1, maxLength: 4 },
      ),
      (parts) => {
        const path = resolve("/", ...parts);
        t.same(parseArchiveUrl(pathToFileURL(path).href), { kind: "folder", path });
        const bare = `./${parts.join("/")}`;
        t.same(parseArchiveUrl(bare), { kind: "folder", path: bare });
        t.same(parseArchiveUrl(path), { kind: "folder", path });
      },
    ),
    { numRuns: 500 },
  );
});

t.test("any string parses to a location or fails with ArchiveUrlError, never repeating it", async () => {
  const urlish = fc.oneof(
    fc.string(),
    fc.string().map((s) => `s3://${s}`),
    fc.string().map((s) => `file://${s}`),
    fc.tuple(fc.string(), fc.string()).map(([user, secret]) => `s3://${user}:${secret}@bucket/prefix`),
    fc.webUrl({ withQueryParameters: true, withFragments: true }),
  );
  fc.assert(
    fc.property(urlish, (value) => {
      let location: ArchiveLocation | undefined;
      try {
        location = parseArchiveUrl(value);
      } catch (error) {
        if (!(error instanceof ArchiveUrlError)) throw error;
        // Its message is one of a few fixed sentences: a URL with a secret in it is not echoed.
        if (value.length >= 8) {
          t.notOk((error as Error).message.includes(value), "the value is not repeated");
        }
        return;
      }
      if (location.kind === "s3") {
        t.match(location.bucket, /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/);
        t.notMatch(location.prefix, /^\/|\/$|\/\//);
      }
    }),
    { numRuns: 2000 },
  );
});

t.test("what is refused, and why", async (t) => {
  const refused: Array<[string, RegExp]> = [
    ["", /is empty/],
    ["s3://AKIAEXAMPLE:wJalrXUtnFEMI@bucket/prefix", /must not carry credentials/],
    ["s3://bucket/prefix?region=eu-west-1", /query or fragment/],
    ["s3://minio:9000/bucket", /not a host and port/],
    ["s3://Bucket/prefix", /must name a bucket/],
    ["s3://ab/prefix", /must name a bucket/],
    ["s3://192.168.1.10/prefix", /must name a bucket/],
    ["s3://bucket//prefix", /must have a prefix/],
    ["s3://bucket/a/../b", /must have a prefix/],
    ["s3://bucket/a b", /must have a prefix/],
    ["https://bucket.s3.amazonaws.com/prefix", /must be a folder, a file:\/\/ URL or an s3:\/\/ URL/],
    ["file://otherhost/var/archive", /names this machine only/],
    ["file:relative/path", /file:\/\/\/absolute\/path/],
  ];
  for (const [value, why] of refused)
    t.throws(() => parseArchiveUrl(value), { name: "ArchiveUrlError", message: why }, value);
  t.same(parseArchiveUrl("file://localhost/var/archive"), { kind: "folder", path: "/var/archive" });
  t.same(parseArchiveUrl("s3://notify-archive"), { kind: "s3", bucket: "notify-archive", prefix: "" });
});

t.test("the settings: ARCHIVE_URL over ARCHIVE_DIR, and a bad one is named without being echoed", async (t) => {
  const Schema = v.object({ ...archive() });
  const target = (env: Record<string, string>) => archiveTarget(parseConfig(Schema, env), env);
  t.same(target({}), { location: { kind: "folder", path: "archive" }, region: "us-east-1" });
  t.same(target({ ARCHIVE_DIR: "/data/archive", ARCHIVE_URL: "" }), {
    location: { kind: "folder", path: "/data/archive" },
    region: "us-east-1",
  });
  t.same(
    target({
      ARCHIVE_DIR: "/data/archive",
      ARCHIVE_URL: "s3://notify-archive/eu",
      ARCHIVE_S3_ENDPOINT: "http://127.0.0.1:9000",
      AWS_REGION: "eu-west-1",
    }),
    {
      location: { kind: "s3", bucket: "notify-archive", prefix: "eu" },
      endpoint: "http://127.0.0.1:9000",
      region: "eu-west-1",
    },
  );
  t.equal(target({ ARCHIVE_S3_REGION: "auto", AWS_REGION: "eu-west-1" }).region, "auto");

  const error = t.throws(() =>
    parseConfig(Schema, {
      ARCHIVE_URL: "s3://AKIAEXAMPLE:wJalrXUtnFEMI@bucket",
      ARCHIVE_S3_ENDPOINT: "http://user:hunter2@minio:9000",
    }),
  ) as ConfigError;
  t.type(error, ConfigError);
  t.match(error.message, /ARCHIVE_URL: must not carry credentials/);
  t.match(
    error.message,
    /ARCHIVE_S3_ENDPOINT: must be http\(s\):\/\/host\[:port\], with no path or credentials \(got \[redacted\]\)/,
  );
  t.notMatch(error.message, /wJalrXUtnFEMI|hunter2/);
});
