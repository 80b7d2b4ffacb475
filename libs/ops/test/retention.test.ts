import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { newId } from "@notify/core";
import type { ArchiveRecord } from "@notify/db";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import { archiveAll, restoreUser } from "../src/retention.js";

// Retention against a fresh database: what `notify retention` and the processor's timer run.
const { database } = await freshDatabase(t);

/**
 * A delivered notification created `daysAgo` days ago, with a channel, its history, an attempt
 * and a fallback chain that ended.
 */
async function seed(userId: string, daysAgo: number): Promise<string> {
  const id = newId();
  await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key,
      request_hash, partition, created_at)
    values (${id}, 'shop', ${userId}, 'news', 'welcome', 'promotional', '{"name":"Ada"}', ${id}, 'h', 1,
      now() - make_interval(days => ${daysAgo}) + interval '123 microseconds')`;
  await database.sql`insert into notification_channels (notification_id, channel, status, provider, provider_id, attempts)
    values (${id}, 'email', 'delivered', 'sendgrid', ${`pm-${id}`}, 1)`;
  await database.sql`insert into channel_status_events (notification_id, channel, status, attempt) values (${id}, 'email', 'delivered', 1)`;
  await database.sql`insert into delivery_attempts (notification_id, channel, attempt, outcome) values (${id}, 'email', 1, 'accepted')`;
  await database.sql`insert into notification_fallbacks (notification_id, steps, next_step, watching, taken, done_at)
    values (${id}, '[{"channel":"sms","when":["failed"]}]', 1, 'email', '[]', now() - make_interval(days => ${daysAgo}))`;
  return id;
}

const snapshot = async (ids: string[]) =>
  database.sql`select to_json(n)::text as n,
      (select json_agg(c)::text from notification_channels c where c.notification_id = n.id) as c,
      (select json_agg(e)::text from channel_status_events e where e.notification_id = n.id) as e,
      (select json_agg(a)::text from delivery_attempts a where a.notification_id = n.id) as a,
      (select json_agg(f)::text from notification_fallbacks f where f.notification_id = n.id) as f
    from notifications n where id = any(${ids}::text[]) order by id`;

t.test("notifications past the window go to gzipped NDJSON per month and come back for a user", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "notify-archive-"));
  const old = [await seed("ada", 100), await seed("ada", 140), await seed("bob", 120)];
  const recent = await seed("ada", 10);
  const before = await snapshot(old);

  t.equal(await archiveAll(database, { dir, days: 90 }), 3, "archived 3 notifications");
  t.equal((await snapshot(old)).length, 0, "gone from the live log, with what hangs off them");
  t.equal((await snapshot([recent])).length, 1, "a recent one stays");
  const [{ n } = { n: 0 }] = await database.sql`select count(*)::int as n from notification_channels`;
  t.equal(n, 1);

  const months = readdirSync(dir).sort();
  t.ok(
    months.every((m) => /^\d{4}-\d\d$/.test(m)),
    months.join(),
  );
  const records = months.flatMap((m) =>
    readdirSync(join(dir, m)).flatMap((f) =>
      gunzipSync(readFileSync(join(dir, m, f)))
        .toString("utf8")
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as ArchiveRecord),
    ),
  );
  t.same(records.map((r) => r.notification.id).sort(), [...old].sort());
  t.match(records[0], { version: 1, channels: [{ status: "delivered" }], attempts: [{ outcome: "accepted" }] });

  t.equal(await restoreUser(database, dir, "ada"), 2, "restored 2 notifications of ada");
  const after = await snapshot(old);
  t.same(
    after,
    before.filter((row) => !String(row.n).includes('"bob"')),
    "rows, channels, history, attempts and fallback chains exactly as they were",
  );
  t.equal(await restoreUser(database, dir, "ada"), 0, "repeatable");
});

t.test("archivers running at once archive each notification once", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "notify-archive-"));
  const ids = await Promise.all(Array.from({ length: 60 }, (_, i) => seed(`u${i}`, 95)));
  const counts = await Promise.all([1, 2, 3].map(() => archiveAll(database, { dir, days: 90, batchSize: 7 })));
  // The earlier test restored two of ada's notifications, still past the window: archived again.
  t.equal(
    counts.reduce((a, b) => a + b, 0),
    ids.length + 2,
  );
});

t.test("a notification with a channel still deferred is not archived: its work is still to do", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "notify-archive-"));
  const id = await seed("cyd", 120);
  await database.sql`update notification_channels set status = 'deferred' where notification_id = ${id}`;
  await database.sql`insert into deferred_notifications (notification_id, user_id, due_at) values (${id}, 'cyd', now())`;
  t.equal(await archiveAll(database, { dir, days: 90 }), 0);
  t.equal((await snapshot([id])).length, 1, "still in the live log");
  await database.sql`delete from deferred_notifications where notification_id = ${id}`;
  t.equal(await archiveAll(database, { dir, days: 90 }), 1, "archived once released");
});
