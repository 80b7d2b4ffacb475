import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { newId } from "@notify/core";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import { runCli } from "./support.js";

// `notify retention ...`: arguments in, libs/ops out (whose own tests cover the archive itself).
const { database } = await freshDatabase(t);

const notify = (argv: string[]) => runCli(argv, { database });

async function seed(userId: string, daysAgo: number): Promise<string> {
  const id = newId();
  await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key,
      request_hash, partition, created_at)
    values (${id}, 'shop', ${userId}, 'news', 'welcome', 'promotional', '{}', ${id}, 'h', 1,
      now() - make_interval(days => ${daysAgo}))`;
  return id;
}

t.test("retention run and restore report what they did", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "notify-archive-"));
  await seed("ada", 100);
  await seed("ada", 40);
  await seed("bob", 100);

  const result = await notify(["retention", "run", "--dir", dir, "--days", "30"]);
  t.equal(result.code, 0, result.stderr);
  t.match(result.stdout, `archived 3 notifications into ${dir}`, "--days moves the window");
  const restored = await notify(["retention", "restore", "--dir", dir, "--user", "ada"]);
  t.equal(restored.code, 0, restored.stderr);
  t.match(restored.stdout, "restored 2 notifications of ada");
  t.match((await notify(["retention", "restore", "--dir", dir, "--user", "ada"])).stdout, "restored 0", "repeatable");
  t.equal((await notify(["retention", "run", "--dir", dir])).code, 0, "the default window (90 days)");
});

t.test("usage errors", async (t) => {
  t.equal((await notify(["retention", "run"])).code, 2, "--dir is required");
  t.equal((await notify(["retention", "run", "--dir", "x", "--days", "0"])).code, 2, "--days 1 or more");
  t.equal((await notify(["retention", "run", "--dir", "x", "--days", "7.5"])).code, 2, "--days whole");
  t.equal((await notify(["retention", "restore", "--dir", "x"])).code, 2, "--user is required");
});
