import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { folderStore } from "@notify/ops";
import { captureLogger, eventually, freshDatabase, idAt } from "@notify/testing";
import t from "tap";
import { startRetention } from "../src/retention/job.js";

// The processor's retention timer archives through @notify/ops what is past the window.
const { database } = await freshDatabase(t);

/** A notification created `daysAgo` days ago, its id made then (as ingest makes it). */
async function seed(daysAgo: number): Promise<string> {
  const createdAt = new Date(Date.now() - daysAgo * 86_400_000);
  const id = idAt(createdAt.getTime());
  await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key,
      request_hash, partition, created_at)
    values (${id}, 'shop', 'ada', 'news', 'welcome', 'promotional', '{}', ${id}, 'h', 1, ${createdAt})`;
  return id;
}

t.test("the job archives notifications past the window and leaves recent ones", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "notify-archive-"));
  const old = await seed(40);
  const recent = await seed(5);
  const { log, lines } = captureLogger();
  const job = startRetention(
    { database, log },
    { intervalMs: 50, days: 30, store: folderStore(dir), partitionHours: 24 },
  );
  t.teardown(() => job.stop());
  const live = async () =>
    (await database.sql<{ id: string }[]>`select id from notifications order by id`).map((r) => r.id);
  await eventually(async () => ((await live()).includes(old) ? undefined : true), 10_000, "the old one archived");
  t.same(await live(), [recent]);
  t.equal(readdirSync(dir).length, 1, "one year folder (YYYY/MM/DD/)");
  await job.stop();
  t.ok(
    lines().some((line) => line.includes("archived notifications past retention")),
    "the archive is logged",
  );
});
