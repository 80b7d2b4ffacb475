import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import type { Channel, DeadLetter, DeadLetterClass, GuardValue, WorkItem } from "@notify/core";
import { REPLAY_REASON } from "@notify/ops";
import { freshBus, freshDatabase, TEST_NATS_URL } from "@notify/testing";
import t from "tap";
import type { CliDeps } from "../src/command.js";
import { parseTime } from "../src/dlq.js";
import { runCli } from "./support.js";

// `notify dlq ...` in process against a fresh database and NATS namespace, and once as the built
// executable. Dead letters are written here as the workers write them (their own tests cover
// how they come to be; apps/workers/test/replay.test.ts replays one through real pools).
const { url, database } = await freshDatabase(t);
const bus = await freshBus(t);
const guard = await bus.kv("notify_send_guard");
const deps: CliDeps = { database, bus: async () => bus, criticalCategories: ["security", "otp"] };

const notify = (argv: string[]) => runCli(argv, deps);
const json = <T>(out: { code: number; stdout: string; stderr: string }): T => {
  if (out.code !== 0) throw new Error(`exit ${out.code}: ${out.stderr}`);
  return JSON.parse(out.stdout) as T;
};

interface Letter {
  item: WorkItem;
  seq: number;
}

/** A channel dead-lettered the way the workers leave one: status, guard and dead letter. */
async function deadLetter(
  options: {
    channel?: Channel;
    to?: string;
    userId?: string;
    category?: string;
    priority?: "transactional" | "promotional";
    cls?: DeadLetterClass;
    reason?: string;
  } = {},
): Promise<Letter> {
  const id = randomUUID();
  const channel = options.channel ?? "email";
  const userId = options.userId ?? `user-${randomUUID()}`;
  const category = options.category ?? "account";
  const priority = options.priority ?? "transactional";
  const cls = options.cls ?? "permanent";
  const reason = options.reason ?? "sendgrid 400: Does not contain a valid address.";
  const status = cls === "outcome_unknown" ? "unsettled" : "failed";
  await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, 'shop', ${userId}, ${category}, 'welcome', ${priority}, ${database.sql.json({ name: "Ada" })}, ${id}, 'h', 0)`;
  await database.sql`insert into notification_channels (notification_id, channel, status, reason, attempts)
    values (${id}, ${channel}, ${status}, ${reason}, 1)`;
  await database.sql`insert into delivery_attempts (notification_id, channel, attempt, outcome, error)
    values (${id}, ${channel}, 1, ${cls === "outcome_unknown" ? "unknown" : "permanent"}, ${reason})`;
  const guardValue: GuardValue =
    cls === "outcome_unknown"
      ? { state: "unknown", at: Date.now(), attempt: 1, reason }
      : { state: "dead", at: Date.now(), attempt: 1, class: cls, reason };
  await guard.put(`${id}.${channel}`, new TextEncoder().encode(JSON.stringify(guardValue)));
  const item: WorkItem = {
    notification_id: id,
    channel,
    priority,
    user_id: userId,
    category,
    to: options.to ?? "old@example.com",
    subject: "Welcome",
    body: "<p>Hello Ada</p>",
    attempt: 0,
  };
  const letter: DeadLetter = {
    version: 1,
    class: cls,
    reason,
    channel,
    lane: priority,
    provider: "sendgrid",
    attempts: 1,
    notification: {
      notification_id: id,
      client_id: "shop",
      user_id: userId,
      category,
      template_id: "welcome",
      template_version: 1,
      priority,
      requested_channels: [channel],
      data: { name: "Ada" },
      dedup_key: id,
      created_at: new Date().toISOString(),
    },
    item,
    history: [{ attempt: 1, outcome: "permanent", provider_id: null, error: reason, at: new Date().toISOString() }],
    dead_lettered_at: new Date().toISOString(),
  };
  const { seq } = await bus.publish(bus.subjects.dlq(channel), letter, `${id}:${channel}:dlq:1`);
  return { item, seq };
}

const contact = (userId: string, email: string | null, phone: string | null = null) =>
  database.sql`insert into user_contacts (user_id, email, phone) values (${userId}, ${email}, ${phone})
    on conflict (user_id) do update set email = excluded.email, phone = excluded.phone`;

const statusOf = async (item: WorkItem) =>
  (
    await database.sql<{ status: string; reason: string | null; attempts_before_replay: number }[]>`
      select status, reason, attempts_before_replay from notification_channels
      where notification_id = ${item.notification_id} and channel = ${item.channel}`
  )[0];
const guardOf = async (item: WorkItem) =>
  (await guard.get(`${item.notification_id}.${item.channel}`))?.json<GuardValue>();

/** Work items published since `after` (the workers' subject, read without consuming). */
async function published(after: number): Promise<WorkItem[]> {
  const info = await bus.jsm.streams.info(bus.streams.work);
  const items: WorkItem[] = [];
  for (let seq = Math.max(after + 1, info.state.first_seq); seq <= info.state.last_seq; seq++) {
    const message = await bus.jsm.streams.getMessage(bus.streams.work, { seq }).catch(() => null);
    if (message) items.push(message.json<WorkItem>());
  }
  return items;
}
const workSeq = async () => (await bus.jsm.streams.info(bus.streams.work)).state.last_seq;

const bounced = await deadLetter({ reason: "sendgrid 400: Does not contain a valid address." });
const exhausted = await deadLetter({
  channel: "sms",
  cls: "retries_exhausted",
  reason: "retries exhausted: plivo 503",
});
const unknown = await deadLetter({ cls: "outcome_unknown", reason: "sendgrid timed out after 10000 ms" });

t.test("list shows dead letters newest first, with filters by channel, reason, time and notification", async (t) => {
  const all = json<{ data: Array<{ seq: number; class: string; channel: string; status_now: string }> }>(
    await notify(["dlq", "list", "--json"]),
  );
  t.same(
    all.data
      .filter((d) => [bounced.seq, exhausted.seq, unknown.seq].includes(d.seq))
      .map((d) => [d.class, d.status_now]),
    [
      ["outcome_unknown", "unsettled"],
      ["retries_exhausted", "failed"],
      ["permanent", "failed"],
    ],
  );
  const seqs = async (...args: string[]) =>
    json<{ data: Array<{ seq: number }> }>(await notify(["dlq", "list", "--json", ...args])).data.map((d) => d.seq);
  t.same(await seqs("--channel", "sms"), [exhausted.seq], "by channel");
  t.same(await seqs("--reason", "retries_exhausted"), [exhausted.seq], "by class");
  t.ok((await seqs("--reason", "VALID ADDRESS")).includes(bounced.seq), "by part of the reason, any case");
  t.same(await seqs("--notification", unknown.item.notification_id), [unknown.seq], "by notification");
  t.same(await seqs("--since", "2099-01-01T00:00:00Z"), [], "since a time");
  t.same(await seqs("--until", "1h", "--channel", "sms"), [], "until a time");
  t.ok((await seqs("--since", "1h")).includes(bounced.seq), "since a duration ago");

  const text = await notify(["dlq", "list", "--channel", "sms"]);
  t.equal(text.code, 0);
  t.match(text.stdout, /^SEQ\s+DEAD-LETTERED\s+CHANNEL\s+LANE\s+CLASS\s+ATTEMPTS\s+NOTIFICATION\s+NOW\s+REASON$/m);
  t.match(text.stdout, new RegExp(`^${exhausted.seq}\\s.*\\ssms\\s+transactional\\s+retries_exhausted\\s+1\\s`, "m"));
  t.equal((await notify(["dlq", "list", "--since", "2099-01-01T00:00:00Z"])).stdout, "no dead letters match\n");
});

t.test("list shows a page at a time, with how many match", async (t) => {
  const page = async (...args: string[]) =>
    json<{ data: Array<{ seq: number }>; page: number; page_size: number; total_count: number }>(
      await notify(["dlq", "list", "--json", ...args]),
    );
  const all = await page("--limit", "1000");
  t.ok(all.total_count >= 3);
  t.equal(all.data.length, all.total_count, "every letter fits one page of 1000");
  const second = await page("--limit", "2", "--page", "2");
  t.match(second, { page: 2, page_size: 2, total_count: all.total_count });
  t.same(
    second.data.map((d) => d.seq),
    all.data.slice(2, 4).map((d) => d.seq),
    "the third and fourth newest",
  );
  const text = await notify(["dlq", "list", "--limit", "1"]);
  t.match(text.stdout, new RegExp(`^1 of ${all.total_count}, newest first: --page 2 for the next 1$`, "m"));
  t.match(await notify(["dlq", "list", "--limit", "0"]), {
    code: 2,
    stderr: /--limit must be an integer from 1 to 1000/,
  });
  t.match(await notify(["dlq", "list", "--page", "x"]), { code: 2, stderr: /--page must be an integer from 1 up/ });
});

t.test("show prints the whole context: request, rendered message, attempts, status history", async (t) => {
  const out = await notify(["dlq", "show", String(bounced.seq)]);
  t.equal(out.code, 0, out.stderr);
  t.match(out.stdout, /^class\s+permanent$/m);
  t.match(out.stdout, /^status now\s+failed \(sendgrid 400/m);
  t.match(out.stdout, /^to\s+old@example.com$/m);
  t.match(out.stdout, /"name": "Ada"/, "the request's data");
  t.match(out.stdout, /Rendered body:\n<p>Hello Ada<\/p>/);
  t.match(out.stdout, /^1\s+\S+Z\s+permanent\s+sendgrid 400/m, "the attempt");
  const doc = json<{ letter: DeadLetter; status_now: { status: string } }>(
    await notify(["dlq", "show", String(bounced.seq), "--json"]),
  );
  t.equal(doc.letter.item.notification_id, bounced.item.notification_id);
  t.equal(doc.status_now.status, "failed");
  t.match(await notify(["dlq", "show", "999999"]), { code: 1, stderr: /no dead letter with sequence 999999/ });
  t.match(await notify(["dlq", "show", "x"]), { code: 2 });
});

t.test("replay --dry-run re-checks preferences and addresses and changes nothing", async (t) => {
  const fixed = await deadLetter();
  await contact(fixed.item.user_id, "new@example.com");
  const optedOut = await deadLetter();
  await contact(optedOut.item.user_id, "o@example.com");
  await database.sql`insert into user_preferences (user_id, channel_optout) values (${optedOut.item.user_id}, ${["email"]})`;
  const critical = await deadLetter({ category: "security" });
  await contact(critical.item.user_id, "c@example.com");
  await database.sql`insert into user_preferences (user_id, channel_optout) values (${critical.item.user_id}, ${["email"]})`;
  const quiet = await deadLetter({ priority: "promotional", category: "offers" });
  await contact(quiet.item.user_id, "q@example.com");
  await database.sql`insert into user_preferences (user_id, quiet_hours)
    values (${quiet.item.user_id}, ${database.sql.json({ start: "00:00", end: "23:59", tz: "UTC" })})`;
  const unreachable = await deadLetter();

  const before = await workSeq();
  const out = json<{
    dry_run: boolean;
    data: Array<{ seq: number; result: string; to?: string; previous_to: string }>;
    summary: string;
  }>(await notify(["dlq", "replay", "--since", "1h", "--dry-run", "--json"]));
  const result = (l: Letter) => out.data.find((d) => d.seq === l.seq);
  t.match(result(fixed), {
    result: "would replay to the user's new address",
    to: "new@example.com",
    previous_to: fixed.item.to,
  });
  t.not(fixed.item.to, "new@example.com", "--json shows the address in the letter beside the one now");
  t.match(result(optedOut), { result: "skipped: preferences today: opted_out" });
  t.match(result(critical), { result: "would replay" }, "a critical category ignores the opt-out");
  t.match(result(quiet), { result: /^skipped: inside quiet hours until / });
  t.match(result(unreachable), { result: "skipped: unreachable: the user has no email address now" });
  t.match(result(unknown), { result: /^skipped: unsettled: the provider may have accepted it/ });
  t.equal(await workSeq(), before, "nothing published");
  t.match(await statusOf(fixed.item), { status: "failed" }, "nothing changed");
  t.match(await guardOf(fixed.item), { state: "dead" });
});

t.test(
  "replay hands the item back to the workers: guard released, status reset and logged, item republished",
  async (t) => {
    const letter = await deadLetter();
    await contact(letter.item.user_id, "fixed@example.com");
    const before = await workSeq();
    const out = await notify(["dlq", "replay", String(letter.seq)]);
    t.equal(out.code, 0, out.stderr);
    t.match(out.stdout, /1 replayed, 0 skipped/);
    t.match(out.stderr, /replay 1\/1/, "progress");
    t.match(await statusOf(letter.item), { status: "pending", reason: REPLAY_REASON, attempts_before_replay: 1 });
    t.match(await guardOf(letter.item), { state: "failed" }, "the next attempt may claim the guard");
    const items = await published(before);
    t.equal(items.length, 1);
    t.match(items[0], { notification_id: letter.item.notification_id, to: "fixed@example.com", subject: "Welcome" });
    const [event] = await database.sql`
    select status, reason from channel_status_events where notification_id = ${letter.item.notification_id}`;
    t.match(event, { status: "pending", reason: REPLAY_REASON }, "the reset is in the status history");
  },
);

t.test("a delivered channel is never replayed; an unsettled one only with --include-unsettled", async (t) => {
  const delivered = await deadLetter();
  await contact(delivered.item.user_id, "d@example.com");
  await database.sql`update notification_channels set status = 'delivered' where notification_id = ${delivered.item.notification_id}`;
  const sentGuard = await deadLetter();
  await contact(sentGuard.item.user_id, "s@example.com");
  await guard.put(
    `${sentGuard.item.notification_id}.email`,
    new TextEncoder().encode(JSON.stringify({ state: "sent", at: Date.now(), attempt: 1, provider_id: "x" })),
  );
  const unsure = await deadLetter({ cls: "outcome_unknown" });
  await contact(unsure.item.user_id, "u@example.com");

  const before = await workSeq();
  const out = json<{ data: Array<{ seq: number; result: string }> }>(
    await notify(["dlq", "replay", String(delivered.seq), String(sentGuard.seq), String(unsure.seq), "--json"]),
  );
  t.same(
    out.data.map((d) => d.result),
    [
      "skipped: channel is delivered",
      "skipped: the provider accepted it (send guard: sent)",
      "skipped: unsettled: the provider may have accepted it (--include-unsettled resends anyway)",
    ],
  );
  t.equal(await workSeq(), before, "nothing published");

  const forced = json<{ data: Array<{ result: string }> }>(
    await notify(["dlq", "replay", String(unsure.seq), "--include-unsettled", "--json"]),
  );
  t.same(
    forced.data.map((d) => d.result),
    ["replayed"],
  );
  t.match(await guardOf(unsure.item), { state: "failed" }, "the unknown guard was released on request");
  t.match(await statusOf(unsure.item), { status: "pending" });
});

t.test("replay needs a selection", async (t) => {
  const out = await notify(["dlq", "replay"]);
  t.equal(out.code, 2);
  t.match(out.stderr, /name dead letters by SEQ, or select them with filters, or pass --all/);
  t.match(await notify(["dlq", "list", "--channel", "fax"]), { code: 2, stderr: /--channel must be one of/ });
  t.match(await notify(["dlq", "list", "--since", "yesterday"]), { code: 2, stderr: /--since must be a duration/ });
});

t.test("parseTime: durations ago and RFC 3339 times", async (t) => {
  const now = Date.parse("2026-01-02T00:00:00Z");
  t.equal(parseTime("24h", "--since", now).toISOString(), "2026-01-01T00:00:00.000Z");
  t.equal(parseTime("30m", "--since", now).toISOString(), "2026-01-01T23:30:00.000Z");
  t.equal(parseTime("2025-12-31T10:00:00Z", "--since", now).toISOString(), "2025-12-31T10:00:00.000Z");
  t.equal(
    parseTime("2025-12-31", "--since", now).toISOString(),
    "2025-12-31T00:00:00.000Z",
    "a day: its midnight in UTC",
  );
  t.throws(() => parseTime("10", "--since", now), /--since must be/);
  // Date.parse read these as the first days of the next month.
  t.throws(() => parseTime("2026-04-31T00:00:00Z", "--until", now), /--until must be/);
  t.throws(() => parseTime("2026-02-30", "--since", now), /--since must be/);
  t.throws(() => parseTime("10000-01-01T00:00:00Z", "--since", now), /--since must be/);
});

t.test("the built executable reads NATS from the environment", async (t) => {
  const bin = fileURLToPath(new URL("../bin/notify.js", import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, [bin, "dlq", "list", "--channel", "sms", "--json"], {
    env: {
      PATH: process.env.PATH ?? "",
      DATABASE_URL: url,
      NATS_URL: TEST_NATS_URL,
      NATS_NAMESPACE: bus.naming.namespace,
    },
  });
  t.same(
    (JSON.parse(stdout) as { data: Array<{ seq: number }> }).data.map((d) => d.seq),
    [exhausted.seq],
  );
});

t.test("dlq poison lists what no consumer could read; show and replay leave it alone", async (t) => {
  const durable = "processor-transactional-p0";
  const { decodeJson, runConsumer } = await import("@notify/bus");
  const runner = await runConsumer({
    bus,
    stream: bus.streams.lane("transactional"),
    durable,
    concurrency: 1,
    decode: (msg) => decodeJson(msg, () => null),
    handle: async () => ({ ack: true as const }),
    onError: () => {},
  });
  t.teardown(() => runner.stop());
  await bus.js.publish(bus.subjects.lane("transactional", 0), new Uint8Array([0x01, 0x41, 0xff]), {
    msgID: "cli-poison",
  });
  let listed: { data: Array<{ seq: number; reason: string; stream_seq: number; data_base64: string }> } = { data: [] };
  for (let i = 0; i < 100 && listed.data.length === 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    listed = json(await notify(["dlq", "poison", "--json"]));
  }
  t.equal(listed.data.length, 1, "one poison message");
  const [kept] = listed.data;
  t.match(kept?.reason, /not UTF-8 JSON/);
  t.equal(kept?.data_base64, Buffer.from([0x01, 0x41, 0xff]).toString("base64"), "its bytes, exactly");
  const text = await notify(["dlq", "poison"]);
  t.match(text.stdout, /\\x01A\\xff/, "the table shows the bytes escaped");
  const shown = await notify(["dlq", "show", String(kept?.seq)]);
  t.not(shown.code, 0, "show refuses it");
  t.match(shown.stderr, /notify dlq poison/, "and says where to look");
  const channelLetters = json<{ data: Array<{ seq: number }> }>(await notify(["dlq", "list", "--json"]));
  t.ok(channelLetters.data.length > 0, "the channel dead letters are still listed");
  t.notOk(
    channelLetters.data.some((l) => l.seq === kept?.seq),
    "but list (and so replay) never meets the poison message",
  );
});
