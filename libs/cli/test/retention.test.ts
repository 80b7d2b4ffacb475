import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startS3Sandbox } from "@notify/devstack";
import { freshDatabase, idAt } from "@notify/testing";
import t from "tap";
import { runCli } from "./support.js";

// `notify retention ...`: arguments in, libs/ops out (whose own tests cover the archive itself).
const { database } = await freshDatabase(t);

const notify = (argv: string[], env: Record<string, string> = {}) => runCli(argv, { database, env });

/** A notification created `daysAgo` days ago, its id made then (as ingest makes it). */
async function seed(userId: string, daysAgo: number): Promise<string> {
  const createdAt = new Date(Date.now() - daysAgo * 86_400_000);
  const id = idAt(createdAt.getTime());
  await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key,
      request_hash, partition, created_at)
    values (${id}, 'shop', ${userId}, 'news', 'welcome', 'promotional', '{}', ${id}, 'h', 1, ${createdAt})`;
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

t.test("an S3 archive: by --url, or by the processor's settings; a notification by its id", async (t) => {
  // Credentials come from the AWS SDK's chain: this process's environment here.
  process.env.AWS_ACCESS_KEY_ID = "AKIACLITEST000000000";
  process.env.AWS_SECRET_ACCESS_KEY = "cli-test-secret";
  process.env.AWS_EC2_METADATA_DISABLED = "true";
  const sandbox = await startS3Sandbox({
    accessKeyId: "AKIACLITEST000000000",
    secretAccessKey: "cli-test-secret",
    buckets: ["archive"],
  });
  t.teardown(() => sandbox.close());
  const endpoint = { ARCHIVE_S3_ENDPOINT: sandbox.url };
  const ada = await seed("ada", 100);
  const bob = await seed("bob", 100);

  const result = await notify(["retention", "run", "--url", "s3://archive/cli"], endpoint);
  t.equal(result.code, 0, result.stderr);
  t.match(result.stdout, "archived 2 notifications into s3://archive/cli");
  t.ok(sandbox.objects("archive").some((o) => /^cli\/\d{4}\/\d\d\/\d\d\/.*\.manifest\.json$/.test(o.key)));

  const configured = { ...endpoint, ARCHIVE_URL: "s3://archive/cli", ARCHIVE_DIR: "/nonexistent" };
  const byUser = await notify(["retention", "restore", "--user", "ada"], configured);
  t.equal(byUser.code, 0, byUser.stderr);
  t.match(byUser.stdout, "restored 1 notifications of ada");
  const byId = await notify(["retention", "restore", "--notification", bob], configured);
  t.equal(byId.code, 0, byId.stderr);
  t.match(byId.stdout, `restored notification ${bob}`);
  t.match(
    (await notify(["retention", "restore", "--notification", bob], configured)).stdout,
    "in the live log already",
  );
  const absent = await notify(["retention", "restore", "--notification", idAt(Date.now())], configured);
  t.equal(absent.code, 1);
  t.match(absent.stderr, "is not in the archive at s3://archive/cli");
  const [row] = await database.sql`select count(*)::int as n from notifications where id = any(${[ada, bob]}::text[])`;
  t.equal(row?.n, 2);

  process.env.AWS_SECRET_ACCESS_KEY = "a-wrong-secret";
  const denied = await notify(["retention", "restore", "--user", "ada"], configured);
  t.equal(denied.code, 1);
  t.match(denied.stderr, /SignatureDoesNotMatch \(HTTP 403\)/);
  t.notMatch(denied.stderr, /a-wrong-secret|cli-test-secret/, "no secret in the error");
  process.env.AWS_SECRET_ACCESS_KEY = "cli-test-secret";
});

t.test("usage errors", async (t) => {
  t.equal((await notify(["retention", "run"])).code, 2, "--dir is required");
  t.equal((await notify(["retention", "run", "--dir", "x", "--days", "0"])).code, 2, "--days 1 or more");
  t.equal((await notify(["retention", "run", "--dir", "x", "--days", "7.5"])).code, 2, "--days whole");
  t.equal((await notify(["retention", "restore", "--dir", "x"])).code, 2, "--user or --notification is required");
  t.equal(
    (await notify(["retention", "restore", "--dir", "x", "--user", "a", "--notification", idAt(0)])).code,
    2,
    "not both",
  );
  t.equal((await notify(["retention", "restore", "--dir", "x", "--notification", "42"])).code, 2, "an id");
  t.equal((await notify(["retention", "run", "--dir", "x", "--url", "s3://archive"])).code, 2, "--dir or --url");
  const leaky = await notify(["retention", "run", "--url", "s3://AKIAEXAMPLE:wJalrXUtnFEMI@archive/x"]);
  t.equal(leaky.code, 2);
  t.match(leaky.stderr, "--url must not carry credentials");
  t.notMatch(leaky.stderr, "wJalrXUtnFEMI");
  const badEnv = await notify(["retention", "run"], { ARCHIVE_URL: "ftp://archive" });
  t.equal(badEnv.code, 78, "a bad ARCHIVE_URL is a configuration error");
  t.match(badEnv.stderr, "ARCHIVE_URL: must be a folder, a file:// URL or an s3:// URL (got [redacted])");
});
