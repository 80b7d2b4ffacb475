import type { ChannelStatus } from "@notify/core";
import { checkCompletions, createEndpoint, putSuppression, readStatusEvents } from "@notify/db";
import t from "tap";
import { laneDeps } from "../src/consumers.js";
import { type Found, type ReconcilerDeps, reconcile } from "../src/reconciler/reconciler.js";
import { routeNotification } from "../src/routing/route.js";
import { channelRows, processorFixture, seedUser, storeNotifications, workItems } from "./helpers.js";

// The reconciler at a stalled channel whose address went on the suppression list after routing,
// against a real Postgres and NATS namespace with no worker running: the channel ends as a first
// routing would have decided (suppressed, address_suppressed, its history naming the entry), no
// work item goes out, and the notification completes.
const { database, bus, deps } = await processorFixture(t);
const reconcilerDeps: ReconcilerDeps = {
  lanes: { transactional: await laneDeps(deps, "transactional"), promotional: await laneDeps(deps, "promotional") },
  database,
  bus,
  log: deps.log,
  onFound: () => {},
};
// The helpers' client wants notification.completed, so a channel's outcome asks for the check.
await createEndpoint(
  database,
  "shop",
  { url: "https://hooks.example.com/in", eventTypes: ["notification.completed"], include: [], description: null },
  10,
);
// Work counts as stalled after 20 s unchanged; each round looks from a minute ahead.
const round = (): Promise<Found | undefined> =>
  reconcile(reconcilerDeps, { afterMs: 20_000, lookbackMs: 3_600_000, now: () => Date.now() + 60_000 });
const itemsOf = async (id: string) => (await workItems(bus)).filter((w) => w.item.notification_id === id);
// Each test starts from settled work: what an earlier one left waiting is delivered.
t.beforeEach(async () => {
  await database.sql`update notification_channels set status = 'delivered' where status <> 'delivered'`;
});

/** Routes an email notification of client "shop" to `userId` and loses its work item. */
async function routedAndLost(userId: string, status: ChannelStatus = "pending") {
  await seedUser(database, userId);
  const [message] = await storeNotifications(database, bus, [{ user_id: userId, channels: ["email"] }]);
  if (!message) throw new Error("not stored");
  await routeNotification(reconcilerDeps.lanes.promotional, message);
  if (status !== "pending")
    await database.sql`update notification_channels set status = ${status}, next_attempt_at = now() - interval '1 minute'
      where notification_id = ${message.notification_id}`;
  await bus.jsm.streams.purge(bus.streams.work);
  return message.notification_id;
}

const suppress = async (address: string, clientId: string) =>
  (
    await putSuppression(database, {
      channel: "email",
      address,
      client_id: clientId,
      reason: "hard_bounce",
      source: {},
    })
  ).entry.created_at.toISOString();

const completedEvent = async (id: string) => {
  while ((await checkCompletions(database, 100)) > 0) {}
  const [event] = await database.sql<Array<{ data: Record<string, unknown> }>>`
    select data from webhook_events where type = 'notification.completed' and notification_id = ${id}`;
  return event?.data;
};

t.test("a pending channel suppressed since routing: ends suppressed, not redriven, and completes", async (t) => {
  const id = await routedAndLost("rs-1");
  const since = await suppress("rs-1@example.com", "");
  t.match(await round(), { unsent: 1 }, "found and driven on");
  t.same((await channelRows(database, id)).email, { status: "suppressed", reason: "address_suppressed", at: null });
  t.match(await readStatusEvents(database, id, "email"), [
    { status: "suppressed", reason: `address_suppressed: hard_bounce, every client, since ${since}` },
  ]);
  t.same(await itemsOf(id), [], "no work item for the suppressed address");
  t.match(await completedEvent(id), {
    status: "suppressed",
    channels: { email: { status: "suppressed", reason: "address_suppressed" } },
  });
  t.match(await round(), { unsent: 0 }, "the next round finds nothing");
});

t.test("a retrying channel whose address is suppressed since: the same", async (t) => {
  const id = await routedAndLost("rs-2", "retrying");
  const since = await suppress("rs-2@example.com", "shop");
  t.match(await round(), { unsent: 1 });
  t.same((await channelRows(database, id)).email, { status: "suppressed", reason: "address_suppressed", at: null });
  t.match(await readStatusEvents(database, id, "email"), [
    { status: "suppressed", reason: `address_suppressed: hard_bounce, this client, since ${since}` },
  ]);
  t.same(await itemsOf(id), []);
  t.match(await completedEvent(id), { status: "suppressed" });
});

t.test("another client's entry does not hold: the work item is published again", async (t) => {
  const id = await routedAndLost("rs-3");
  await suppress("rs-3@example.com", "other-client");
  t.match(await round(), { unsent: 1 });
  t.same((await channelRows(database, id)).email, { status: "pending", reason: null, at: null });
  t.match(
    (await itemsOf(id)).map((w) => w.item),
    [{ channel: "email", to: "rs-3@example.com" }],
  );
});

t.test("a pending channel whose address is gone since routing: suppressed as unreachable", async (t) => {
  const id = await routedAndLost("rs-4");
  await database.sql`update user_contacts set email = null where user_id = 'rs-4'`;
  t.match(await round(), { unsent: 1 });
  t.same((await channelRows(database, id)).email, { status: "suppressed", reason: "unreachable", at: null });
  t.match(await readStatusEvents(database, id, "email"), [{ status: "suppressed", reason: "unreachable" }]);
  t.same(await itemsOf(id), []);
  t.match(await completedEvent(id), { status: "suppressed" });
});
