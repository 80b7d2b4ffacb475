import { listUnsubscribeHeaders, verifyUnsubscribeToken } from "@notify/core";
import { loadUnsubscribeKey, optOutCategory } from "@notify/db";
import t from "tap";
import { laneDeps } from "../src/consumers.js";
import { routeNotification } from "../src/routing/route.js";
import { channelRows, processorFixture, seedUser, storeNotifications, workItems } from "./helpers.js";

// The unsubscribe loop on the routing side: a work item names its client (what the workers'
// link carries), and once the link's token is used (optOutCategory, what POST /u/{token} runs:
// apps/ingest/test/unsubscribe.test.ts) the next notification of that category is not sent.
const { database, bus, deps } = await processorFixture(t);
const lane = await laneDeps(deps, "promotional");

t.test("an unsubscribed category is suppressed by preference for the notifications that follow", async (t) => {
  await seedUser(database, "ada", { push: false });
  const [first] = await storeNotifications(database, bus, [{ user_id: "ada", category: "news", channels: ["email"] }]);
  if (!first) throw new Error("not stored");
  t.equal(await routeNotification(lane, first), "routed");
  const item = (await workItems(bus)).find((w) => w.item.notification_id === first.notification_id)?.item;
  t.match(item, { channel: "email", client_id: "shop", user_id: "ada", category: "news", priority: "promotional" });
  if (!item) return;

  // The link the workers put on that email, and what its token says.
  const key = await loadUnsubscribeKey(database);
  const headers = listUnsubscribeHeaders(
    key,
    { baseUrl: "https://notify.example.com", categories: [], criticalCategories: [] },
    item,
  );
  const token = /\/u\/([^>]+)>/.exec(headers?.["List-Unsubscribe"] ?? "")?.[1] ?? "";
  const claims = verifyUnsubscribeToken(key, token);
  t.same(claims, { clientId: "shop", userId: "ada", category: "news" });
  if (!claims) return;
  t.equal(await optOutCategory(database, claims.userId, claims.category), true);

  const [next, other] = await storeNotifications(database, bus, [
    { user_id: "ada", category: "news", channels: ["email"] },
    { user_id: "ada", category: "offers", channels: ["email"] },
  ]);
  if (!next || !other) throw new Error("not stored");
  await routeNotification(lane, next);
  await routeNotification(lane, other);
  t.same(await channelRows(database, next.notification_id), {
    email: { status: "suppressed", reason: "category_opted_out", at: null },
  });
  const queued = (await workItems(bus)).map((w) => w.item.notification_id);
  t.notOk(queued.includes(next.notification_id), "nothing queued for it");
  t.ok(queued.includes(other.notification_id), "another category still goes");
});
