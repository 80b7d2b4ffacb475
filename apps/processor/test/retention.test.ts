import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { newId } from "@notify/core";
import { captureLogger, eventually, freshDatabase } from "@notify/testing";
import t from "tap";
import { startRetention } from "../src/retention/job.js";

// The processor's retention timer archives through @notify/ops what is past the window.
const { database } = await freshDatabase(t);

async function seed(daysAgo: number): Promise<string> {
  const id = newId();
  await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key,
      request_hash, partition, created_at)
    values (${id}, 'shop', 'ada', 'news', 'welcome', 'promotional', '{}', ${id}, 'h', 1,
      now() - make_interval(days => ${daysAgo}))`;
  return id;
}

t.test("the job archives notifications past the window and leaves recent ones", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "notify-archive-"));
  const old = await seed(40);
  const recent = await seed(5);
  const { log, lines } = captureLogger();
  const job = startRetention({ database, log }, { intervalMs: 50, days: 30, dir });
  t.teardown(() => job.stop());
  const live = async () =>
    (await database.sql<{ id: string }[]>`select id from notifications order by id`).map((r) => r.id);
  await eventually(async () => ((await live()).includes(old) ? undefined : true), 10_000, "the old one archived");
  t.same(await live(), [recent]);
  t.equal(readdirSync(dir).length, 1, "one month folder");
  await job.stop();
  t.ok(
    lines().some((line) => line.includes("archived notifications past retention")),
    "the archive is logged",
  );
});
