import { createHash } from "node:crypto";
import { gunzipSync } from "node:zlib";
import { parseArchiveUrl } from "@notify/config";
import { newId } from "@notify/core";
import type { ArchiveRecord } from "@notify/db";
import { startS3Sandbox } from "@notify/devstack";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import { type ArchiveStore, ArchiveStoreError, openArchiveStore, s3Store } from "../src/archive-store.js";
import {
  ArchiveIntegrityError,
  type ArchiveManifest,
  archiveAll,
  restoreNotification,
  restoreUser,
} from "../src/retention.js";
import { live, seed as seedAt, seedWithIdFrom, snapshot as snapshotOf } from "./retention-support.js";

// Retention into an S3-compatible store: the S3 sandbox, over S3's wire protocol, signed by the
// AWS SDK with credentials from its standard chain (the environment here).
const ACCESS_KEY_ID = "AKIAARCHIVETEST00000";
const SECRET = "archive-test-secret-access-key";
process.env.AWS_ACCESS_KEY_ID = ACCESS_KEY_ID;
process.env.AWS_SECRET_ACCESS_KEY = SECRET;
process.env.AWS_EC2_METADATA_DISABLED = "true";
delete process.env.AWS_SESSION_TOKEN;
delete process.env.AWS_PROFILE;

const { database } = await freshDatabase(t);
const sandbox = await startS3Sandbox({
  accessKeyId: ACCESS_KEY_ID,
  secretAccessKey: SECRET,
  buckets: ["notify-archive"],
});
t.teardown(() => sandbox.close());

const open = (url: string) => {
  const store = openArchiveStore({ location: parseArchiveUrl(url), endpoint: sandbox.url, region: "us-east-1" });
  t.teardown(() => store.close());
  return store;
};

/** The store, with the keys it was asked to list and read. */
function watched(store: ArchiveStore) {
  const listed: string[] = [];
  const read: string[] = [];
  const wrapped: ArchiveStore = {
    ...store,
    location: store.location,
    list: (prefix) => {
      listed.push(prefix);
      return store.list(prefix);
    },
    get: (key) => {
      read.push(key);
      return store.get(key);
    },
  };
  return { store: wrapped, listed, read };
}

const seed = (userId: string, daysAgo: number) => seedAt(database, userId, daysAgo);
const snapshot = (ids: string[]) => snapshotOf(database, ids);

t.test("archive to S3, then restore a user and a notification", async (t) => {
  const store = open("s3://notify-archive/prod/eu");
  const ada = [await seed("ada", 100), await seed("ada", 100), await seed("ada", 120)];
  const bob = [await seed("bob", 100), await seed("bob", 121)];
  const cyd = await seed("cyd", 150);
  const lateId = await seedWithIdFrom(database, "cyd", 130, 200);
  const recent = await seed("ada", 5);
  const old = [...ada, ...bob, cyd, lateId];
  const before = await snapshot(old);

  t.equal(await archiveAll(database, { store, days: 90, batchSize: 2 }), old.length);
  t.same(await live(database, [...old, recent]), [recent]);

  const objects = sandbox.objects("notify-archive");
  t.ok(
    objects.every((o) => o.key.startsWith("prod/eu/")),
    "under the prefix",
  );
  const data = objects.filter((o) => o.key.endsWith(".ndjson.gz"));
  const manifests = objects.filter((o) => o.key.endsWith(".manifest.json"));
  t.same(
    manifests.map((o) => o.key),
    data.map((o) => o.key.replace(/\.ndjson\.gz$/, ".manifest.json")),
    "a manifest for each data object, and nothing else",
  );
  t.ok(
    data.every((o) => o.content_type === "application/gzip"),
    "gzip",
  );
  t.ok(
    manifests.every((o) => o.content_type === "application/json"),
    "JSON",
  );
  const archived: string[] = [];
  for (const object of data) {
    const body = sandbox.body("notify-archive", object.key) as Buffer;
    const records = gunzipSync(body)
      .toString("utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as ArchiveRecord);
    const manifest = JSON.parse(
      String(sandbox.body("notify-archive", object.key.replace(/\.ndjson\.gz$/, ".manifest.json"))),
    ) as ArchiveManifest;
    const ids = records.map((r) => r.notification.id).sort();
    const created = records.map((r) => new Date(String(r.notification.created_at)).getTime()).sort();
    const day = new Date(created[0] as number).toISOString().slice(0, 10).replaceAll("-", "/");
    t.match(
      object.key,
      new RegExp(`^prod/eu/${day}/[0-9TZ-]+-${ids[0]}\\.ndjson\\.gz$`),
      "day of created_at, lowest id",
    );
    t.same(
      { ...manifest, created_from: undefined, created_to: undefined, written_at: undefined },
      {
        format: "notify-archive",
        version: 1,
        data: object.key.slice("prod/eu/".length),
        records: records.length,
        bytes: body.length,
        sha256: createHash("sha256").update(body).digest("hex"),
        first_id: ids[0],
        last_id: ids.at(-1),
        created_from: undefined,
        created_to: undefined,
        written_at: undefined,
      },
    );
    t.equal(new Date(manifest.created_from).getTime(), created[0]);
    t.equal(new Date(manifest.created_to).getTime(), created.at(-1));
    archived.push(...ids);
  }
  t.same(archived.sort(), [...old].sort(), "every notification once");

  t.equal(await restoreUser(database, store, "ada"), 3);
  t.same(
    await snapshot(ada),
    before.filter((row) => String(row.n).includes('"ada"')),
    "exactly as they were",
  );
  t.equal(await restoreUser(database, store, "ada"), 0, "repeatable");

  const watch = watched(store);
  t.same(await restoreNotification(database, watch.store, cyd), { found: true, restored: true });
  t.same(
    await snapshot([cyd]),
    before.filter((row) => String(row.n).includes(cyd)),
  );
  t.notOk(watch.listed.includes(""), "only the days around the id's time are listed");
  const dataRead = watch.read.filter((key) => key.endsWith(".ndjson.gz"));
  t.equal(dataRead.length, 1, "one data object read: the one whose manifest's id range holds the id");
  t.same(await restoreNotification(database, store, cyd), { found: true, restored: false }, "repeatable");

  const late = watched(store);
  t.same(
    await restoreNotification(database, late.store, lateId),
    { found: true, restored: true },
    "an id made far from its created_at: found by reading every manifest",
  );
  t.ok(late.listed.includes(""));
  t.equal(late.read.filter((key) => key.endsWith(".ndjson.gz")).length, 1, "still one data object read");

  t.same(await restoreNotification(database, store, newId()), { found: false, restored: false }, "never archived");
  // What came back is still past the window: archived again, out of the way of the next tests.
  t.equal(await archiveAll(database, { store, days: 90 }), 5);
});

t.test(
  "a changed or cut object fails the restore with an error naming it, and nothing of it is restored",
  async (t) => {
    const store = open("s3://notify-archive/corrupt");
    const ids = [await seed("eve", 100), await seed("eve", 100)];
    t.equal(await archiveAll(database, { store, days: 90 }), 2);
    const [object] = sandbox
      .objects("notify-archive")
      .filter((o) => o.key.startsWith("corrupt/") && o.key.endsWith(".gz"));
    const key = String(object?.key).slice("corrupt/".length);
    const body = Buffer.from(sandbox.body("notify-archive", `corrupt/${key}`) as Buffer);

    const flipped = Buffer.from(body);
    const middle = Math.floor(flipped.length / 2);
    flipped.writeUInt8(flipped.readUInt8(middle) ^ 0x01, middle);
    await store.put(key, flipped, "application/gzip");
    const mismatch = new RegExp(
      `^archive object s3://notify-archive/corrupt/${key.replaceAll(".", "\\.")} does not match its manifest .*\\.manifest\\.json: sha256 [0-9a-f]{64}, the manifest says [0-9a-f]{64}`,
    );
    await t.rejects(restoreUser(database, store, "eve"), { name: "ArchiveIntegrityError", key, message: mismatch });
    await t.rejects(restoreNotification(database, store, ids[0] as string), ArchiveIntegrityError);
    t.same(await live(database, ids), [], "nothing restored");

    // A change gzip itself does not notice (its header's MTIME): only the sha256 does.
    const retimed = Buffer.from(body);
    retimed.writeUInt8(retimed.readUInt8(4) ^ 0x01, 4);
    await store.put(key, retimed, "application/gzip");
    await t.rejects(restoreUser(database, store, "eve"), { message: mismatch }, "a body that still inflates");
    t.same(await live(database, ids), [], "nothing restored");

    await store.put(key, body.subarray(0, body.length - 9), "application/gzip");
    await t.rejects(restoreUser(database, store, "eve"), { message: mismatch }, "cut short");

    await store.put(key, body, "application/gzip");
    t.equal(await restoreUser(database, store, "eve"), 2, "the original bytes restore");
    t.equal(await archiveAll(database, { store, days: 90 }), 2);
  },
);

t.test("a wrong secret fails the archive as S3 fails it, names no secret, and the rows stay", async (t) => {
  const store = s3Store({
    bucket: "notify-archive",
    prefix: "denied",
    endpoint: sandbox.url,
    credentials: { accessKeyId: ACCESS_KEY_ID, secretAccessKey: "not-the-secret-at-all" },
  });
  t.teardown(() => store.close());
  const id = await seed("fay", 100);
  const error = await archiveAll(database, { store, days: 90 }).catch((e: unknown) => e);
  t.type(error, ArchiveStoreError);
  t.match(
    (error as Error).message,
    /^writing s3:\/\/notify-archive\/denied\/.* failed: SignatureDoesNotMatch \(HTTP 403\)/,
  );
  t.notMatch((error as Error).message, /not-the-secret-at-all|archive-test-secret/);
  t.same(await live(database, [id]), [id], "still live: nothing is deleted before it is archived");
  t.same(
    sandbox.objects("notify-archive").filter((o) => o.key.startsWith("denied/")),
    [],
  );
  t.equal(await archiveAll(database, { store: open("s3://notify-archive/denied"), days: 90 }), 1);
});
