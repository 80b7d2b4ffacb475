import type { LaneMessage } from "@notify/core";
import { seedTemplate } from "@notify/db";
import t from "tap";
import { laneDeps } from "../src/consumers.js";
import { sendDigests } from "../src/digests/send.js";
import { routeNotification } from "../src/routing/route.js";
import { channelRows, processorFixture, seedUser, storeNotifications } from "./helpers.js";

// While a partition's delivery order is in doubt (after a processor restart, a lost or repeated
// delivery), a lane message waits for the user's previous notification in the lane to be routed.
// A digest item is routed when it joins its digest and never has channel rows of its own: the
// notifications after it, the digest's own notification first of all, are not held behind it.
const { database, bus, clock, deps } = await processorFixture(t);
await seedTemplate(database, {
  id: "comments",
  params: ["who"],
  variants: [
    {
      channel: "email",
      locale: "en",
      subject: "<%= it.count %> new comments",
      body: "<% for (const c of it.items) { %><p><%= c.who %></p><% } %>",
    },
  ],
});
const lane = await laneDeps(deps, "transactional");
const digest = { key: "post-1", window: "30s", max_items: 50 };

async function store(userId: string, over: Parameters<typeof storeNotifications>[2][number] = { user_id: userId }) {
  const [message] = await storeNotifications(database, bus, [{ priority: "transactional", ...over, user_id: userId }]);
  if (!message) throw new Error("not stored");
  return message;
}

t.test("a notification after the user's joined digest item is not held behind it", async (t) => {
  await seedUser(database, "do-1");
  clock.now = new Date("2026-06-01T13:00:00Z");
  const item = await store("do-1", { user_id: "do-1", template_id: "comments", data: { who: "Ann" }, digest });
  t.equal(await routeNotification(lane, item), "routed", "the item joins its digest");
  const next = await store("do-1");
  t.equal(await routeNotification(lane, next, { order: "hold" }), "routed", "not held");
  t.match(await channelRows(database, next.notification_id), { email: { status: "pending" } });
});

t.test("an item not yet joined still holds the user's next notification", async (t) => {
  await seedUser(database, "do-2");
  await store("do-2", { user_id: "do-2", template_id: "comments", data: { who: "Bob" }, digest });
  const next = await store("do-2");
  t.equal(await routeNotification(lane, next, { order: "hold" }), "held");
});

t.test("a digest's own notification is not held behind its items", async (t) => {
  await seedUser(database, "do-3");
  clock.now = new Date("2026-06-01T12:00:00Z");
  for (const who of ["Cy", "Di"]) {
    const item = await store("do-3", { user_id: "do-3", template_id: "comments", data: { who }, digest });
    await routeNotification(lane, item);
  }
  clock.now = new Date("2026-06-01T12:00:30Z");
  t.equal(await sendDigests(lane), 1);
  const stream = bus.streams.lane("transactional");
  const info = await bus.jsm.streams.info(stream);
  const row = (await bus.jsm.streams.getMessage(stream, { seq: info.state.last_seq }))?.json<LaneMessage>();
  if (!row?.digest_of) throw new Error("the digest's notification was not published");
  t.equal(await routeNotification(lane, row, { order: "hold" }), "routed", "not held behind its own items");
  t.match(await channelRows(database, row.notification_id), { email: { status: "pending" } });
});
