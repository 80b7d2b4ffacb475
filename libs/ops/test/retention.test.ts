import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync, gzipSync } from "node:zlib";
import type { ArchiveRecord } from "@notify/db";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import { folderStore } from "../src/archive-store.js";
import { type ArchiveManifest, archiveAll, restoreNotification, restoreUser } from "../src/retention.js";
import { seed as seedAt, snapshot as snapshotOf } from "./retention-support.js";

// Retention against a fresh database: what `notify retention` and the processor's timer run.
const { database } = await freshDatabase(t);

const seed = (userId: string, daysAgo: number) => seedAt(database, userId, daysAgo);
const snapshot = (ids: string[]) => snapshotOf(database, ids);

/** Every file under `dir`, as keys ("2025/01/31/x"). */
function files(dir: string, base = ""): string[] {
  return readdirSync(join(dir, base), { withFileTypes: true })
    .flatMap((entry) => (entry.isDirectory() ? files(dir, `${base}${entry.name}/`) : [`${base}${entry.name}`]))
    .sort();
}

const lines = (gz: Buffer) =>
  gunzipSync(gz)
    .toString("utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as ArchiveRecord);

t.test(
  "notifications past the window go to a folder as gzipped NDJSON per day with manifests, and come back",
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), "notify-archive-"));
    const store = folderStore(dir);
    const old = [await seed("ada", 100), await seed("ada", 140), await seed("bob", 120)];
    const recent = await seed("ada", 10);
    const before = await snapshot(old);

    t.equal(await archiveAll(database, { store, days: 90 }), 3, "archived 3 notifications");
    t.equal((await snapshot(old)).length, 0, "gone from the live log, with what hangs off them");
    t.equal((await snapshot([recent])).length, 1, "a recent one stays");
    const [{ n } = { n: 0 }] = await database.sql`select count(*)::int as n from notification_channels`;
    t.equal(n, 1);

    const keys = files(dir);
    const data = keys.filter((k) => k.endsWith(".ndjson.gz"));
    t.equal(data.length, 3, "three days, three data files");
    t.ok(
      data.every((k) => /^\d{4}\/\d\d\/\d\d\/[0-9TZ-]+-[0-9a-f-]{36}\.ndjson\.gz$/.test(k)),
      data.join(),
    );
    t.same(
      keys.filter((k) => !k.endsWith(".ndjson.gz")),
      data.map((k) => k.replace(/\.ndjson\.gz$/, ".manifest.json")),
      "each with its manifest, and nothing else (no .partial)",
    );
    const records = data.flatMap((k) => lines(readFileSync(join(dir, k))));
    t.same(records.map((r) => r.notification.id).sort(), [...old].sort());
    t.match(records[0], { version: 1, channels: [{ status: "delivered" }], attempts: [{ outcome: "accepted" }] });
    for (const key of data) {
      const manifest = JSON.parse(
        readFileSync(join(dir, key.replace(/\.ndjson\.gz$/, ".manifest.json")), "utf8"),
      ) as ArchiveManifest;
      const [record] = lines(readFileSync(join(dir, key)));
      const created = new Date(String(record?.notification.created_at)).toISOString().slice(0, 10);
      t.equal(key.slice(0, 10), created.replaceAll("-", "/"), "the folder is the day of created_at");
      t.match(manifest, {
        format: "notify-archive",
        version: 1,
        data: key,
        records: 1,
        bytes: readFileSync(join(dir, key)).length,
        sha256: createHash("sha256")
          .update(readFileSync(join(dir, key)))
          .digest("hex"),
        first_id: record?.notification.id,
        last_id: record?.notification.id,
      });
      t.match(manifest.created_from, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
      t.equal(new Date(manifest.created_from).getTime(), new Date(String(record?.notification.created_at)).getTime());
    }

    t.equal(await restoreUser(database, store, "ada"), 2, "restored 2 notifications of ada");
    const after = await snapshot(old);
    t.same(
      after,
      before.filter((row) => !String(row.n).includes('"bob"')),
      "rows, channels, history, attempts and fallback chains exactly as they were",
    );
    t.equal(await restoreUser(database, store, "ada"), 0, "repeatable");
    t.same(await restoreNotification(database, store, old[2] as string), { found: true, restored: true }, "bob's one");
    t.same(await snapshot(old), before, "all three back");
    t.same(
      await restoreNotification(database, store, old[2] as string),
      { found: true, restored: false },
      "repeatable",
    );
    // Archived again for the tests after this one.
    t.equal(await archiveAll(database, { store, days: 90 }), 3);
  },
);

t.test("archives of the month layout, without manifests, are still read; data no manifest names is not", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "notify-archive-"));
  const store = folderStore(dir);
  const monthly = await seed("dan", 200);
  const orphan = await seed("dan", 201);
  const before = await snapshot([monthly]);
  const scratch = folderStore(mkdtempSync(join(tmpdir(), "notify-archive-")));
  t.equal(await archiveAll(database, { store: scratch, days: 90 }), 2);
  const keys: string[] = [];
  for await (const key of scratch.list("")) keys.push(key);
  const records = await Promise.all(
    keys
      .filter((k) => k.endsWith(".ndjson.gz"))
      .map(async (k) => {
        const chunks: Buffer[] = [];
        for await (const chunk of await scratch.get(k)) chunks.push(chunk as Buffer);
        return lines(Buffer.concat(chunks));
      }),
  );
  const line = (id: string) => JSON.stringify(records.flat().find((r) => r.notification.id === id));
  // As releases before the day layout wrote them: YYYY-MM/<time>-<id>.ndjson.gz, no manifest.
  mkdirSync(join(dir, "2024-01"));
  writeFileSync(join(dir, "2024-01", `20240201T000000000Z-${monthly}.ndjson.gz`), gzipSync(`${line(monthly)}\n`));
  // A data file whose manifest was never written: its rows were not deleted then.
  mkdirSync(join(dir, "2024", "01", "02"), { recursive: true });
  writeFileSync(
    join(dir, "2024", "01", "02", `20240201T000000000Z-${orphan}.ndjson.gz`),
    gzipSync(`${line(orphan)}\n`),
  );
  writeFileSync(join(dir, "2024", "01", "02", "x.ndjson.gz.partial"), "torn");

  t.equal(await restoreUser(database, store, "dan"), 1, "the month-layout one");
  t.same(await snapshot([monthly]), before);
  t.same(await restoreNotification(database, store, orphan), { found: false, restored: false });
  t.same(await restoreNotification(database, store, monthly), { found: true, restored: false }, "found by id too");
  t.equal(await archiveAll(database, { store: scratch, days: 90 }), 1, "archived again, for the tests after this one");
});

t.test("a record whose arrays are broken over lines, as json_agg wrote them, is still read", async (t) => {
  const scratch = folderStore(mkdtempSync(join(tmpdir(), "notify-archive-")));
  const id = await seed("erin", 200);
  await database.sql`insert into channel_status_events (notification_id, channel, status, attempt, user_id)
    values (${id}, 'email', 'pending', 0, 'erin'), (${id}, 'email', 'sent', 1, 'erin')`;
  const before = await snapshot([id]);
  t.equal(await archiveAll(database, { store: scratch, days: 90 }), 1);
  const keys: string[] = [];
  for await (const key of scratch.list("")) keys.push(key);
  const chunks: Buffer[] = [];
  for await (const chunk of await scratch.get(keys.find((k) => k.endsWith(".ndjson.gz")) as string)) {
    chunks.push(chunk as Buffer);
  }
  const [record] = lines(Buffer.concat(chunks));
  t.ok((record?.status_events.length ?? 0) > 1, "a record with several status rows");
  // json_agg's separator between elements: a comma, a line break and a space.
  const broken = JSON.stringify(record).replaceAll("},{", "}, \n {");
  t.ok(broken.split("\n").length > 2, "the record spans several lines");
  const body = gzipSync(`${broken}\n`);
  const dir = mkdtempSync(join(tmpdir(), "notify-archive-"));
  mkdirSync(join(dir, "2024", "03", "04"), { recursive: true });
  const base = join(dir, "2024", "03", "04", `20240304T000000000Z-${id}`);
  writeFileSync(`${base}.ndjson.gz`, body);
  const manifest: ArchiveManifest = {
    format: "notify-archive",
    version: 1,
    data: `2024/03/04/20240304T000000000Z-${id}.ndjson.gz`,
    records: 1,
    bytes: body.length,
    sha256: createHash("sha256").update(body).digest("hex"),
    first_id: id,
    last_id: id,
    created_from: record?.notification.created_at as string,
    created_to: record?.notification.created_at as string,
    written_at: new Date().toISOString(),
  };
  writeFileSync(`${base}.manifest.json`, JSON.stringify(manifest));
  const store = folderStore(dir);
  t.same(await restoreNotification(database, store, id), { found: true, restored: true });
  t.same(await snapshot([id]), before, "restored whole");
  t.equal(await archiveAll(database, { store: scratch, days: 90 }), 1, "archived again, for the tests after this one");
});

t.test("archivers running at once archive each notification once", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "notify-archive-"));
  const ids = await Promise.all(Array.from({ length: 60 }, (_, i) => seed(`u${i}`, 95)));
  const store = folderStore(dir);
  const counts = await Promise.all([1, 2, 3].map(() => archiveAll(database, { store, days: 90, batchSize: 7 })));
  t.equal(
    counts.reduce((a, b) => a + b, 0),
    ids.length,
  );
  const data = files(dir).filter((k) => k.endsWith(".ndjson.gz"));
  const archived = data.flatMap((k) => lines(readFileSync(join(dir, k))).map((r) => r.notification.id));
  t.same(archived.sort(), [...ids].sort(), "each in one file");
});

t.test("a notification with a channel still deferred is not archived: its work is still to do", async (t) => {
  const store = folderStore(mkdtempSync(join(tmpdir(), "notify-archive-")));
  const id = await seed("cyd", 120);
  await database.sql`update notification_channels set status = 'deferred' where notification_id = ${id}`;
  await database.sql`insert into deferred_notifications (notification_id, user_id, due_at) values (${id}, 'cyd', now())`;
  t.equal(await archiveAll(database, { store, days: 90 }), 0);
  t.equal((await snapshot([id])).length, 1, "still in the live log");
  await database.sql`delete from deferred_notifications where notification_id = ${id}`;
  t.equal(await archiveAll(database, { store, days: 90 }), 1, "archived once released");
});
