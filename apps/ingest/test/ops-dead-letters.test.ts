import { randomUUID } from "node:crypto";
import { requestReply } from "@notify/bus";
import { type Channel, type DeadLetter, type GuardValue, guardKey, type WorkItem } from "@notify/core";
import { readStatusEvents, seedApiKey } from "@notify/db";
import { findDeadLetter, replayDeadLetters } from "@notify/ops";
import { captureLogger } from "@notify/testing";
import t from "tap";
import { deadLetterResponder, ingestApp } from "./support.js";

// POST /api/v1/dead-letters/replay (libs/ops replayDeadLetters, as `notify dlq replay`) and
// GET /api/v1/dead-letters/{seq}: any client's letters, for the operator scope. Letters are
// written the way the workers write them. Ingest asks the processor to read and replay
// (notify.ops.dlq.show, notify.ops.replay): the processor's responder runs here, on the same
// database and namespace, with a log of its own.
const { app, database, bus } = await ingestApp(t);
const root = t;
const processor = captureLogger("processor");
const startResponder = () => deadLetterResponder(root, { database, bus, log: processor.log }, ["security"]);
let responder = await startResponder();
const operator = await seedApiKey(database, { clientId: "ops", name: "operator", scopes: ["operator"] });
const reader = await seedApiKey(database, { clientId: "shop", name: "reader", scopes: ["read", "ingest"] });
const guard = await bus.kv("notify_send_guard");

async function deadLetter(
  client: string,
  options: { cls?: DeadLetter["class"]; reason?: string; channel?: Channel } = {},
) {
  const id = randomUUID();
  const userId = `user-${randomUUID().slice(0, 8)}`;
  const channel = options.channel ?? "email";
  const cls = options.cls ?? "permanent";
  const reason = options.reason ?? "sendgrid 400: Does not contain a valid address.";
  await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, ${client}, ${userId}, 'account', 'welcome', 'transactional', '{}', ${id}, 'h', 0)`;
  await database.sql`insert into notification_channels (notification_id, channel, status, reason, attempts)
    values (${id}, ${channel}, 'failed', ${reason}, 1)`;
  const value: GuardValue = { state: "dead", at: Date.now(), attempt: 1, class: cls, reason };
  await guard.put(guardKey(id, channel), new TextEncoder().encode(JSON.stringify(value)));
  const item: WorkItem = {
    notification_id: id,
    channel,
    priority: "transactional",
    user_id: userId,
    category: "account",
    to: channel === "email" ? "old@example.com" : "+15550000000",
    subject: "Welcome",
    body: "<p>Hello</p>",
    attempt: 0,
  };
  const letter: DeadLetter = {
    version: 1,
    class: cls,
    reason,
    channel,
    lane: "transactional",
    provider: channel === "email" ? "sendgrid" : "plivo",
    attempts: 1,
    notification: null,
    item,
    history: [],
    dead_lettered_at: new Date().toISOString(),
  };
  const { seq } = await bus.publish(bus.subjects.dlq(channel), letter, `${id}:${channel}:dlq`);
  return { item, seq, userId };
}

const request = async (method: string, path: string, body?: unknown, key = operator) => {
  const response = await app.request(`/api/v1${path}`, {
    method,
    headers: { "x-api-key": key, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  // biome-ignore lint/suspicious/noExplicitAny: answers of many shapes, checked by t.match and t.same
  return { status: response.status, type: response.headers.get("content-type"), body: (await response.json()) as any };
};
const replay = (body: unknown, key = operator) => request("POST", "/dead-letters/replay", body, key);
const channelOf = async (item: WorkItem) =>
  (
    await database.sql<{ status: string; reason: string | null }[]>`
      select status, reason from notification_channels where notification_id = ${item.notification_id} and channel = ${item.channel}`
  )[0];
const guardOf = async (item: WorkItem) =>
  (await guard.get(guardKey(item.notification_id, item.channel)))?.json<GuardValue>();
const workCount = async () => (await bus.jsm.streams.info(bus.streams.work)).state.messages;

const shopLetter = await deadLetter("shop");
const bankLetter = await deadLetter("bank");
await database.sql`insert into user_contacts (user_id, email) values (${shopLetter.userId}, 'new@example.com')`;
await database.sql`insert into user_contacts (user_id, email) values (${bankLetter.userId}, 'old@example.com')`;

t.test("a dry run lists the address diff of any client's letters and changes nothing", async (t) => {
  const before = await workCount();
  const answer = await replay({ seqs: [shopLetter.seq, bankLetter.seq], dry_run: true });
  t.equal(answer.status, 200);
  t.match(answer.body, { dry_run: true, selected: 2, replayed: 0, skipped: 0 });
  t.same(answer.body.data, [
    {
      seq: shopLetter.seq,
      notification_id: shopLetter.item.notification_id,
      channel: "email",
      result: "would replay to the user's new address",
      to: "new@example.com",
      previous_to: "old@example.com",
    },
    {
      seq: bankLetter.seq,
      notification_id: bankLetter.item.notification_id,
      channel: "email",
      result: "would replay",
      to: "old@example.com",
      previous_to: "old@example.com",
    },
  ]);
  t.equal(await workCount(), before, "nothing published");
  t.match(await channelOf(shopLetter.item), { status: "failed" }, "the channel untouched");
  t.match(await guardOf(shopLetter.item), { state: "dead" }, "the guard untouched");
});

t.test("a replay republishes to the address now; a delivered channel is skipped", async (t) => {
  const before = await workCount();
  const answer = await replay({ seqs: [shopLetter.seq] });
  t.equal(answer.status, 200);
  t.match(answer.body, {
    dry_run: false,
    selected: 1,
    replayed: 1,
    skipped: 0,
    data: [{ seq: shopLetter.seq, result: "replayed", to: "new@example.com", previous_to: "old@example.com" }],
  });
  t.equal(await workCount(), before + 1, "one work item republished");
  const published = await bus.jsm.streams.getMessage(bus.streams.work, {
    last_by_subj: bus.subjects.work("email", "transactional"),
  });
  t.match(published?.json<WorkItem>(), { notification_id: shopLetter.item.notification_id, to: "new@example.com" });
  t.match(await channelOf(shopLetter.item), { status: "pending", reason: "replay" });
  t.match(await guardOf(shopLetter.item), { state: "failed" }, "the guard may be claimed again");
  // The worker sends it this time.
  await database.sql`update notification_channels set status = 'delivered', reason = null
    where notification_id = ${shopLetter.item.notification_id}`;
  const again = await replay({ seqs: [shopLetter.seq] });
  t.match(again.body, { replayed: 0, skipped: 1, data: [{ result: "skipped: channel is delivered", to: null }] });
  t.equal(await workCount(), before + 1, "nothing more published");
});

t.test("filters select as the list's do; class is exact", async (t) => {
  const sms = await deadLetter("bank", {
    channel: "sms",
    cls: "retries_exhausted",
    reason: "looks permanent to a reader",
  });
  const byClass = await replay({ class: "permanent", channel: "sms", dry_run: true });
  t.same(byClass.body.data, [], "a reason mentioning the class is not that class");
  const byChannel = await replay({ channel: "sms", dry_run: true });
  t.same(
    byChannel.body.data.map((d: { seq: number }) => d.seq),
    [sms.seq],
  );
  const all = await replay({ all: true, dry_run: true });
  t.ok(all.body.selected >= 3, "all: every letter");
  t.same(
    (await replay({ notification_id: bankLetter.item.notification_id, dry_run: true })).body.data.map(
      (d: { seq: number }) => d.seq,
    ),
    [bankLetter.seq],
  );
});

t.test("bad bodies are 400 problems naming the field", async (t) => {
  const cases: Array<[unknown, string]> = [
    [{}, "seqs"],
    [{ dry_run: true }, "seqs"],
    [{ seqs: [] }, "seqs"],
    [{ seqs: [0] }, "seqs.0"],
    [{ seqs: ["1"] }, "seqs.0"],
    [{ all: "yes" }, "all"],
    [{ all: true, class: "nope" }, "class"],
    [{ all: true, channel: "fax" }, "channel"],
    [{ all: true, since: "yesterday" }, "since"],
    [{ all: true, extra: 1 }, "extra"],
  ];
  for (const [body, field] of cases) {
    const answer = await replay(body);
    t.equal(answer.status, 400, JSON.stringify(body));
    t.equal(answer.type, "application/problem+json");
    t.ok(
      answer.body.errors?.some((e: { field: string }) => e.field === field),
      `${JSON.stringify(body)} names ${field}: ${JSON.stringify(answer.body.errors)}`,
    );
  }
});

t.test("one letter in full; unknown and malformed sequences", async (t) => {
  const answer = await request("GET", `/dead-letters/${bankLetter.seq}`);
  t.equal(answer.status, 200);
  t.match(answer.body, {
    seq: bankLetter.seq,
    letter: { class: "permanent", channel: "email", item: { to: "old@example.com", user_id: bankLetter.userId } },
    status_now: { status: "failed", attempts: 1 },
    status_history: [],
  });
  t.ok(Date.parse(answer.body.dead_lettered_at) > 0);
  const missing = await request("GET", "/dead-letters/999999");
  t.equal(missing.status, 404);
  t.match(missing.body, { code: "not_found" });
  for (const seq of ["abc", "0", "-1", "1.5"]) {
    const bad = await request("GET", `/dead-letters/${seq}`);
    t.equal(bad.status, 400, seq);
    t.match(bad.body, { code: "validation_failed", errors: [{ field: "seq" }] });
  }
});

t.test("one letter as the route answered it when ingest read the stream, byte for byte", async (t) => {
  await database.sql`insert into channel_status_events (notification_id, channel, status, reason, attempt)
    values (${bankLetter.item.notification_id}, 'email', 'failed', 'sendgrid 400', 1)`;
  const detail = await findDeadLetter({ bus, database }, bankLetter.seq);
  if (!detail) throw new Error("the letter is stored");
  const expected = {
    seq: detail.stored.seq,
    dead_lettered_at: detail.stored.time.toISOString(),
    letter: detail.stored.letter,
    status_now: detail.state ?? null,
    status_history: await readStatusEvents(database, bankLetter.item.notification_id, "email"),
  };
  const response = await app.request(`/api/v1/dead-letters/${bankLetter.seq}`, { headers: { "x-api-key": operator } });
  t.equal(response.status, 200);
  t.equal(await response.text(), JSON.stringify(expected));
  t.match(JSON.parse(JSON.stringify(expected)), { status_history: [{ status: "failed", attempt: 1 }] });
});

t.test("the processor logs each replay with the key that asked, its counts and whether it was a dry run", async (t) => {
  const [key] = await database.sql<{ id: string }[]>`select id from api_keys where client_id = 'ops'`;
  const logged = () =>
    processor
      .lines()
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => typeof line.msg === "string" && line.msg.startsWith("dead letters replay"));
  const before = logged().length;
  const letter = await deadLetter("bank");
  await database.sql`insert into user_contacts (user_id, email) values (${letter.userId}, 'old@example.com')`;
  t.equal((await replay({ seqs: [letter.seq], dry_run: true })).status, 200);
  t.equal((await replay({ seqs: [letter.seq] })).status, 200);
  const lines = logged().slice(before);
  t.match(lines, [
    {
      msg: "dead letters replay planned",
      key_id: key?.id,
      client_id: "ops",
      dry_run: true,
      selected: 1,
      replayed: 0,
      skipped: 0,
      remaining: 0,
    },
    {
      msg: "dead letters replayed",
      key_id: key?.id,
      client_id: "ops",
      dry_run: false,
      selected: 1,
      replayed: 1,
      skipped: 0,
      remaining: 0,
    },
  ]);
  t.equal(lines.length, 2);
});

t.test("the operator scope only", async (t) => {
  for (const [method, path, body] of [
    ["POST", "/dead-letters/replay", { all: true, dry_run: true }],
    ["GET", `/dead-letters/${bankLetter.seq}`, undefined],
  ] as const) {
    const answer = await request(method, path, body, reader);
    t.equal(answer.status, 403, `${method} ${path}`);
    t.match(answer.body, { code: "insufficient_scope" });
  }
});

t.test("no processor answering is a 503 with Retry-After; a bad request reaching it is its 400", async (t) => {
  await responder.stop();
  const none = await replay({ all: true, dry_run: true });
  t.equal(none.status, 503);
  t.match(none.body, { code: "dependency_unavailable" });
  const response = await app.request("/api/v1/dead-letters/replay", {
    method: "POST",
    headers: { "x-api-key": operator, "content-type": "application/json" },
    body: JSON.stringify({ all: true, dry_run: true }),
  });
  t.ok(Number(response.headers.get("retry-after")) >= 1, "Retry-After");
  responder = await startResponder();
  // Only the processor may replay, so it validates what it is asked whatever sent it: the
  // replay, and who asked for it.
  const by = { key_id: "k1", client_id: "ops" };
  const asked = await requestReply(bus, bus.subjects.opsReplay, { all: true, extra: 1, requested_by: by }, 5000);
  t.match(asked, { ok: false, error: { code: "validation_failed", fields: [{ field: "extra" }] } });
  const empty = await requestReply(bus, bus.subjects.opsReplay, { dry_run: true, requested_by: by }, 5000);
  t.match(empty, { ok: false, error: { code: "validation_failed", fields: [{ field: "seqs" }] } });
  const anonymous = await requestReply(bus, bus.subjects.opsReplay, { all: true, dry_run: true }, 5000);
  t.match(anonymous, { ok: false, error: { code: "validation_failed", fields: [{ field: "requested_by" }] } });
  for (const [requestedBy, field] of [
    [{ key_id: "", client_id: "ops" }, "requested_by.key_id"],
    [{ key_id: "k1" }, "requested_by.client_id"],
    [{ ...by, scopes: ["operator"] }, "requested_by.scopes"],
    ["k1", "requested_by"],
  ] as const) {
    const answer = await requestReply(bus, bus.subjects.opsReplay, { all: true, requested_by: requestedBy }, 5000);
    t.match(
      answer,
      { ok: false, error: { code: "validation_failed", fields: [{ field }] } },
      JSON.stringify(requestedBy),
    );
  }
  const shown = await requestReply(bus, bus.subjects.opsDlqShow, { seq: "1" }, 5000);
  t.match(shown, { ok: false, error: { code: "validation_failed", fields: [{ field: "seq" }] } });
  t.equal((await replay({ seqs: [bankLetter.seq], dry_run: true })).status, 200, "answered again");
});

t.test("a selection by filters takes at most a batch; the answer says where the rest starts", async (t) => {
  const first = await deadLetter("bank", { channel: "push" });
  const second = await deadLetter("bank", { channel: "push" });
  const third = await deadLetter("bank", { channel: "push" });
  const one = await replayDeadLetters(
    { database, bus, criticalCategories: [] },
    { seqs: [], filters: { channel: "push" }, includeUnsettled: false, dryRun: true, limit: 2 },
  );
  t.same(
    one.results.map((r) => r.seq),
    [first.seq, second.seq],
  );
  t.match(one, { remaining: 1, nextSeq: third.seq });
  const rest = await replay({ channel: "push", from_seq: third.seq, dry_run: true });
  t.equal(rest.status, 200);
  t.match(rest.body, { selected: 1, remaining: 0, next_seq: null, data: [{ seq: third.seq }] });
  const whole = await replay({ channel: "push", dry_run: true });
  t.match(whole.body, { selected: 3, remaining: 0, next_seq: null });
});
