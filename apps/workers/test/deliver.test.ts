import type { GuardValue } from "@notify/core";
import { storeInboxItem } from "@notify/db";
import { startSendgridSandbox } from "@notify/devstack";
import { createInAppProvider, createSendgridProvider } from "@notify/providers";
import t from "tap";
import { deliver } from "../src/delivery/deliver.js";
import { channelRow, deadLetters, harness, statusHistory, workItem } from "./helpers.js";

// deliver() against a real database, a real NATS namespace and the SendGrid sandbox.
const h = await harness(t);
const sandbox = await startSendgridSandbox({ port: 0, apiKey: "SG.test" });
t.teardown(() => sandbox.close());
const [gate] = h.gates([
  createSendgridProvider({ apiKey: "SG.test", baseUrl: sandbox.url, from: "n@example.com", timeoutMs: 1500 }),
]);
if (!gate) throw new Error("no gate");
const deps = h.deps(gate);
const { database, guard, bus } = h;

const sentTo = (id: string) => sandbox.messages().filter((m) => m.custom_args.notification_id === id).length;
const guardOf = async (id: string) => (await guard.get(`${id}.email`))?.json<GuardValue>();
const encode = (value: GuardValue) => new TextEncoder().encode(JSON.stringify(value));

t.test("an accepted send is recorded delivered with the provider id; a redelivery sends nothing", async (t) => {
  const item = await workItem(database);
  t.same(await deliver(deps, item), { ack: true });
  const row = await channelRow(database, item);
  t.match(row, { status: "delivered", attempts: 1, provider: "sendgrid", reason: null });
  const mail = sandbox.messages().find((m) => m.custom_args.notification_id === item.notification_id);
  t.equal(row?.provider_id, mail?.message_id, "the provider id is SendGrid's X-Message-Id");
  t.match(await guardOf(item.notification_id), { state: "sent", provider_id: mail?.message_id, attempt: 1 });
  t.same(await deliver(deps, item), { ack: true }, "a redelivered item is acknowledged");
  t.equal(sentTo(item.notification_id), 1, "and not sent again");
  const history = await statusHistory(database, item);
  t.same(
    history.map((e) => e.status),
    ["delivered"],
  );
  t.ok(history[0]?.at instanceof Date, "with its time");
  const lines = h.log
    .lines()
    .filter((line) => line.includes(item.notification_id))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  t.match(
    lines.filter((l) => l.msg === "delivered"),
    [
      {
        level: 30,
        notification_id: item.notification_id,
        channel: "email",
        lane: "transactional",
        status: "delivered",
        attempt: 1,
        provider: "sendgrid",
        provider_id: mail?.message_id,
      },
    ],
    "one wide event per delivery, with the item's ids",
  );
});

t.test(
  "the status is written with the guard's sent: a failed guard write still records the delivery once",
  async (t) => {
    const item = await workItem(database);
    // The guard's bucket answers its create and get, and fails the write that records the send.
    const failingPut = Object.create(guard, {
      put: { value: () => Promise.reject(new Error("TIMEOUT")) },
    }) as typeof guard;
    t.same(await deliver(h.deps(gate, { guard: failingPut }), item), { ack: true });
    t.match(await channelRow(database, item), { status: "delivered", attempts: 1, provider: "sendgrid" });
    t.match(await guardOf(item.notification_id), { state: "sending" }, "the guard still holds the claim");
    t.same(await deliver(deps, item), { ack: true }, "a redelivery is acknowledged");
    t.equal(sentTo(item.notification_id), 1, "and not sent again");
  },
);

t.test("a live claim of another worker is left alone and looked at again after its lifetime", async (t) => {
  const item = await workItem(database);
  await guard.create(
    `${item.notification_id}.email`,
    encode({ state: "sending", at: Date.now(), attempt: 1, worker: "other:2" }),
  );
  const disposition = await deliver(deps, item);
  t.ok("retryInMs" in disposition && disposition.retryInMs > 8000 && disposition.retryInMs <= 11_000, "nak'ed");
  t.equal(sentTo(item.notification_id), 0, "not sent");
  t.match(await channelRow(database, item), { status: "pending" }, "status untouched");
});

t.test("a claim left sending past its lifetime is unsettled and dead-lettered, never resent", async (t) => {
  const item = await workItem(database);
  const stale = Date.now() - deps.claimTtlMs - 1;
  await guard.create(
    `${item.notification_id}.email`,
    encode({ state: "sending", at: stale, attempt: 1, worker: "gone:9" }),
  );
  t.same(await deliver(deps, item), { ack: true });
  t.equal(sentTo(item.notification_id), 0);
  t.match(await channelRow(database, item), { status: "unsettled", attempts: 1, reason: /worker gone:9 stopped/ });
  t.match(await guardOf(item.notification_id), { state: "unknown" });
  const [letter] = await deadLetters(bus, item.notification_id);
  t.match(letter, { class: "outcome_unknown", attempts: 1, history: [{ attempt: 1, outcome: "unknown" }] });
  t.same(await deliver(deps, item), { ack: true }, "a later redelivery is acknowledged");
  t.equal(sentTo(item.notification_id), 0, "and never sends");
});

t.test(
  "in-app: a claim left sending by a dead worker is taken over and stored once (the inbox is idempotent)",
  async (t) => {
    const [inAppGate] = h.gates([
      createInAppProvider({
        store: (m) =>
          storeInboxItem(database.sql, {
            userId: m.to,
            notificationId: m.notificationId,
            category: m.category,
            title: m.subject,
            body: m.body,
          }),
      }),
    ]);
    if (!inAppGate) throw new Error("no gate");
    const inAppDeps = h.deps(inAppGate);
    const item = await workItem(database, { channel: "in_app", to: "u1" });
    const inboxItems = async () =>
      Number(
        (
          await database.sql`select count(*)::int as n from inbox_items where notification_id = ${item.notification_id}`
        )[0]?.n,
      );
    // The dead worker got as far as the inbox: its item is there, its outcome never recorded.
    await storeInboxItem(database.sql, {
      userId: "u1",
      notificationId: item.notification_id,
      category: "account",
      title: "Hi",
      body: "Hi",
    });
    await guard.create(
      `${item.notification_id}.in_app`,
      encode({ state: "sending", at: Date.now() - inAppDeps.claimTtlMs - 1, attempt: 1, worker: "gone:9" }),
    );
    t.same(await deliver(inAppDeps, item), { ack: true });
    t.match(await channelRow(database, item), { status: "delivered", provider: "inapp", attempts: 1 });
    t.equal(await inboxItems(), 1, "one inbox item, not two");
    t.match((await guard.get(`${item.notification_id}.in_app`))?.json<GuardValue>(), { state: "sent" });
  },
);

t.test("in-app: the inbox's own database error is retried with backoff, then stored once", async (t) => {
  let failing = true;
  const [inAppGate] = h.gates([
    createInAppProvider({
      store: async (m) => {
        // What postgres.js rejects with when the inbox's database is unreachable.
        if (failing) throw Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });
        return storeInboxItem(database.sql, {
          userId: m.to,
          notificationId: m.notificationId,
          category: m.category,
          title: m.subject,
          body: m.body,
        });
      },
    }),
  ]);
  if (!inAppGate) throw new Error("no gate");
  const inAppDeps = h.deps(inAppGate);
  const item = await workItem(database, { channel: "in_app", to: "u2" });
  const first = await deliver(inAppDeps, item);
  t.ok("retryInMs" in first && first.retryInMs > 0, "retried after a delay, not acknowledged");
  t.match(await channelRow(database, item), { status: "retrying", attempts: 1, reason: /inbox unavailable/ });
  t.match((await guard.get(`${item.notification_id}.in_app`))?.json<GuardValue>(), { state: "failed" });
  failing = false;
  t.same(await deliver(inAppDeps, item), { ack: true });
  t.match(await channelRow(database, item), { status: "delivered", provider: "inapp", attempts: 2 });
  t.same(await deadLetters(bus, item.notification_id), [], "nothing dead-lettered");
});

t.test("in-app: an outcome recorded unknown is asked again, not left unsettled", async (t) => {
  const [inAppGate] = h.gates([
    createInAppProvider({
      store: (m) =>
        storeInboxItem(database.sql, {
          userId: m.to,
          notificationId: m.notificationId,
          category: m.category,
          title: m.subject,
          body: m.body,
        }),
    }),
  ]);
  if (!inAppGate) throw new Error("no gate");
  const item = await workItem(database, { channel: "in_app", to: "u3" });
  await guard.create(
    `${item.notification_id}.in_app`,
    encode({ state: "unknown", at: Date.now() - 1000, attempt: 1, worker: "gone:9", reason: "timed out" }),
  );
  t.same(await deliver(h.deps(inAppGate), item), { ack: true });
  t.match(await channelRow(database, item), { status: "delivered", provider: "inapp" });
});
t.test("a guard saying sent (status write lost in a crash) is reconciled to delivered without a send", async (t) => {
  const item = await workItem(database);
  await guard.create(
    `${item.notification_id}.email`,
    encode({ state: "sent", at: Date.now(), attempt: 1, provider_id: "msg-1" }),
  );
  t.same(await deliver(deps, item), { ack: true });
  t.equal(sentTo(item.notification_id), 0);
  t.match(await channelRow(database, item), { status: "delivered", provider_id: "msg-1", attempts: 1 });
});

t.test("a guard saying dead (crash before the status write) finishes the dead-lettering once", async (t) => {
  const item = await workItem(database, { to: "dead@example.com" });
  await guard.create(
    `${item.notification_id}.email`,
    encode({ state: "dead", at: Date.now(), attempt: 2, class: "permanent", reason: "sendgrid 400: bad" }),
  );
  t.same(await deliver(deps, item), { ack: true });
  t.equal(sentTo(item.notification_id), 0);
  t.match(await channelRow(database, item), { status: "failed", reason: "sendgrid 400: bad", attempts: 2 });
  t.equal((await deadLetters(bus, item.notification_id)).length, 1);
});

t.test("transient failures retry with backoff, release the guard, then dead-letter after N attempts", async (t) => {
  const item = await workItem(database, { to: "flaky@example.com" });
  sandbox.fault({ status: 503, match_to: "flaky@example.com" });
  for (let attempt = 1; attempt < deps.maxAttempts; attempt++) {
    const disposition = await deliver(deps, item);
    t.ok("retryInMs" in disposition && disposition.retryInMs <= deps.retryMaxMs, `attempt ${attempt} is retried`);
    t.match(await channelRow(database, item), { status: "retrying", attempts: attempt, reason: /^sendgrid 503/ });
    t.match(await guardOf(item.notification_id), { state: "failed", attempt }, "claim released: a retry may send");
  }
  t.same(await deliver(deps, item), { ack: true });
  t.match(await channelRow(database, item), {
    status: "failed",
    attempts: deps.maxAttempts,
    reason: /^retries exhausted after 3 attempts: sendgrid 503/,
  });
  t.match(await guardOf(item.notification_id), { state: "dead", class: "retries_exhausted" });
  const letters = await deadLetters(bus, item.notification_id);
  t.equal(letters.length, 1, "one dead letter");
  const letter = letters[0];
  t.match(letter, {
    version: 1,
    class: "retries_exhausted",
    channel: "email",
    lane: "transactional",
    provider: "sendgrid",
    attempts: 3,
    item: { notification_id: item.notification_id, to: "flaky@example.com", subject: "Hi", body: "<p>Hi</p>" },
    notification: {
      notification_id: item.notification_id,
      user_id: "u1",
      template_id: "welcome",
      data: { name: "Ada" },
    },
  });
  t.same(
    letter?.history.map((a) => [a.attempt, a.outcome]),
    [
      [1, "transient"],
      [2, "transient"],
      [3, "transient"],
    ],
    "every attempt is kept",
  );
  t.ok(letter?.history.every((a) => a.error?.startsWith("sendgrid 503") && !Number.isNaN(Date.parse(a.at))));
  const history = await statusHistory(database, item);
  t.same(
    history.map((e) => [e.status, e.attempt]),
    [
      ["retrying", 1],
      ["retrying", 2],
      ["failed", 3],
    ],
    "every transition is logged with its attempt",
  );
  t.ok(
    history.every((e) => e.reason && e.at instanceof Date),
    "with a reason and a time",
  );
  t.equal(sentTo(item.notification_id), 0);
});

t.test("a retry after a definite failure sends again and delivers", async (t) => {
  const item = await workItem(database, { to: "once@example.com" });
  sandbox.fault({ status: 500, match_to: "once@example.com", times: 1 });
  const first = await deliver(deps, item);
  t.ok("retryInMs" in first);
  t.same(await deliver(deps, item), { ack: true });
  t.match(await channelRow(database, item), { status: "delivered", attempts: 2 });
  t.equal(sentTo(item.notification_id), 1);
  t.same(
    (await statusHistory(database, item)).map((e) => e.status),
    ["retrying", "delivered"],
  );
});

t.test("a permanent failure is dead-lettered at once, without retry", async (t) => {
  const item = await workItem(database, { to: "rejected@example.com" });
  sandbox.fault({ status: 400, match_to: "rejected@example.com" });
  t.same(await deliver(deps, item), { ack: true });
  t.match(await channelRow(database, item), { status: "failed", attempts: 1 });
  t.match(await deadLetters(bus, item.notification_id), [{ class: "permanent", attempts: 1 }]);
});

t.test("Retry-After from the provider is honoured", async (t) => {
  const item = await workItem(database, { to: "slow-down@example.com" });
  sandbox.fault({ status: 429, retry_after_seconds: 7, match_to: "slow-down@example.com" });
  const disposition = await deliver(deps, item);
  t.ok("retryInMs" in disposition && disposition.retryInMs >= 7000);
});

t.test("a provider that does not answer in time leaves the outcome unknown: unsettled, never resent", async (t) => {
  const item = await workItem(database, { to: "hang@example.com" });
  sandbox.fault({ delay_ms: 3000, match_to: "hang@example.com", times: 1 });
  t.same(await deliver(deps, item), { ack: true });
  t.match(await channelRow(database, item), { status: "unsettled", reason: /timed out/ });
  t.match(await deadLetters(bus, item.notification_id), [{ class: "outcome_unknown" }]);
  t.same(await deliver(deps, item), { ack: true });
  t.match(await channelRow(database, item), { status: "unsettled" }, "a redelivery changes nothing");
});

t.test("an item whose channel is already settled is acknowledged without a send", async (t) => {
  const item = await workItem(database);
  await database.sql`update notification_channels set status = 'suppressed' where notification_id = ${item.notification_id}`;
  t.same(await deliver(deps, item), { ack: true });
  t.equal(sentTo(item.notification_id), 0);
  t.equal(await guardOf(item.notification_id), undefined, "the guard is not even claimed");
});
