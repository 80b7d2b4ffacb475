import t from "tap";
import { laneDeps } from "../src/consumers.js";
import { routeNotification } from "../src/routing/route.js";
import { channelRows, processorFixture, seedUser, storeNotifications, workItems } from "./helpers.js";

// routeNotification against a real Postgres and NATS namespace: the policy's outcome for every
// channel is recorded, and what is to be sent is rendered and queued.
const { database, bus, clock, deps } = await processorFixture(t);
const lane = await laneDeps(deps, "promotional");
const transactional = await laneDeps(deps, "transactional");
const route = async (n: Parameters<typeof storeNotifications>[2][number]) => {
  const [message] = await storeNotifications(database, bus, [n]);
  if (!message) throw new Error("not stored");
  const outcome = await routeNotification(message.priority === "promotional" ? lane : transactional, message);
  return { message, outcome, channels: await channelRows(database, message.notification_id) };
};
const itemsOf = async (notificationId: string) =>
  (await workItems(bus)).filter((w) => w.item.notification_id === notificationId);
const day = new Date("2026-06-01T12:00:00Z");
const londonNight = new Date("2026-06-01T22:30:00Z"); // 23:30 BST
t.beforeEach(() => {
  clock.now = day;
});

t.test("without an override, every channel the user is reachable on; opted-out ones are recorded", async (t) => {
  await seedUser(database, "sel-1", { channel_optout: ["sms"] });
  const { message, outcome, channels } = await route({ user_id: "sel-1", channels: null });
  t.equal(outcome, "routed");
  t.same(channels, {
    email: { status: "pending", reason: null, at: null },
    push: { status: "pending", reason: null, at: null },
    sms: { status: "suppressed", reason: "opted_out", at: null },
  });
  const items = await itemsOf(message.notification_id);
  t.same(items.map((i) => i.subject).sort(), [
    bus.subjects.work("email", "promotional"),
    bus.subjects.work("push", "promotional"),
  ]);
  const email = items.find((i) => i.item.channel === "email")?.item;
  t.match(email, { to: "sel-1@example.com", subject: "Hi Ada", body: "<p>Deal for Ada</p>", user_id: "sel-1" });
});

t.test("the override decides the channels; in-app needs no address, others do", async (t) => {
  await database.sql`insert into user_contacts (user_id, email) values ('sel-2', 'sel-2@example.com')`;
  const { channels } = await route({ user_id: "sel-2", channels: ["in_app", "sms", "email"] });
  t.same(channels, {
    email: { status: "pending", reason: null, at: null },
    in_app: { status: "pending", reason: null, at: null },
    sms: { status: "suppressed", reason: "unreachable", at: null },
  });
  const nobody = await route({ user_id: "sel-nobody", channels: null });
  t.same(
    Object.values(nobody.channels).map((c) => c.reason),
    ["unreachable", "unreachable", "unreachable"],
    "a user reachable nowhere shows why nothing was sent",
  );
});

t.test("category opt-out suppresses every channel; critical categories ignore every preference", async (t) => {
  await seedUser(database, "crit-1", {
    channel_optout: ["email", "sms", "push"],
    category_optout: ["news", "security"],
    quiet_hours: { start: "22:00", end: "07:00", tz: "Europe/London" },
    rate_cap_per_day: 0,
  });
  clock.now = londonNight;
  const news = await route({ user_id: "crit-1", channels: ["email", "in_app"], priority: "transactional" });
  t.same(news.channels, {
    email: { status: "suppressed", reason: "opted_out", at: null },
    in_app: { status: "suppressed", reason: "category_opted_out", at: null },
  });
  for (const priority of ["transactional", "promotional"] as const) {
    const security = await route({ user_id: "crit-1", category: "security", channels: ["email", "sms"], priority });
    t.same(
      security.channels,
      { email: { status: "pending", reason: null, at: null }, sms: { status: "pending", reason: null, at: null } },
      `${priority} security: sent at night, opted out, over a zero cap`,
    );
  }
  const otp = await route({ user_id: "crit-1", category: "otp", channels: ["sms"], priority: "promotional" });
  t.equal(otp.channels.sms?.status, "pending", "a one-time passcode is never suppressed");
});

t.test("quiet hours: transactional is sent, promotional is deferred to the window's end", async (t) => {
  await seedUser(database, "quiet-1", { quiet_hours: { start: "22:00", end: "07:00", tz: "Europe/London" } });
  clock.now = londonNight;
  const tx = await route({ user_id: "quiet-1", priority: "transactional", category: "orders" });
  t.same(tx.channels, { email: { status: "pending", reason: null, at: null } });
  t.equal((await itemsOf(tx.message.notification_id)).length, 1);

  const promo = await route({ user_id: "quiet-1", channels: ["email", "push"] });
  const end = new Date("2026-06-02T06:00:00Z"); // 07:00 BST
  t.same(promo.channels, {
    email: { status: "deferred", reason: "quiet_hours", at: end },
    push: { status: "deferred", reason: "quiet_hours", at: end },
  });
  t.same(await itemsOf(promo.message.notification_id), [], "nothing queued while deferred");
  const [timer] =
    await database.sql`select due_at from deferred_notifications where notification_id = ${promo.message.notification_id}`;
  t.same(timer?.due_at, end, "the durable timer is set");

  const flash = await route({ user_id: "quiet-1", category: "flash_sale" });
  t.same(flash.channels, { email: { status: "suppressed", reason: "quiet_hours", at: null } }, "a drop category");

  clock.now = end;
  const morning = await route({ user_id: "quiet-1" });
  t.equal(morning.channels.email?.status, "pending", "after the window, sent at once");
});

t.test("quiet hours are the user's: the same instant is night in one zone and day in another", async (t) => {
  await seedUser(database, "tz-ny", { quiet_hours: { start: "22:00", end: "07:00", tz: "America/New_York" } });
  await seedUser(database, "tz-kol", { quiet_hours: { start: "22:00", end: "07:00", tz: "Asia/Kolkata" } });
  clock.now = new Date("2026-03-08T06:30:00Z"); // 01:30 EST, the night New York springs forward; 12:00 in Kolkata
  const ny = await route({ user_id: "tz-ny" });
  t.same(
    ny.channels.email,
    { status: "deferred", reason: "quiet_hours", at: new Date("2026-03-08T11:00:00Z") },
    "07:00 EDT",
  );
  const kolkata = await route({ user_id: "tz-kol" });
  t.equal(kolkata.channels.email?.status, "pending");
});

t.test("templates: the pinned version renders, with the user's locale and its fallbacks", async (t) => {
  const { sql } = database;
  await sql`insert into templates (id, default_locale, latest_version) values ('greet', 'en', 2)`;
  await sql`insert into template_versions (template_id, version, params, default_locale) values
    ('greet', 1, '["name"]', 'en'), ('greet', 2, '["name", "city"]', 'en')`;
  await sql`insert into template_variants (template_id, version, channel, locale, subject, body_template) values
    ('greet', 1, 'email', 'en', 'v1', 'v1 <%= it.name %>'),
    ('greet', 2, 'email', 'en', 'Hello', 'Hello <%= it.name %> of <%= it.city %>'),
    ('greet', 2, 'email', 'fr', 'Bonjour', 'Bonjour <%= it.name %> de <%= it.city %>'),
    ('greet', 2, 'email', 'en-GB', 'Hiya', 'Hiya <%= it.name %> of <%= it.city %>'),
    ('greet', 2, 'sms', 'en', null, '<%= it.missing.deep %>')`;
  const data = { name: "Zoë <3", city: "Lyon" };
  const cases = [
    { user: "loc-fr", locale: "fr-CA", subject: "Bonjour", body: "Bonjour Zoë &lt;3 de Lyon" },
    { user: "loc-gb", locale: "en-GB", subject: "Hiya", body: "Hiya Zoë &lt;3 of Lyon" },
    { user: "loc-de", locale: "de", subject: "Hello", body: "Hello Zoë &lt;3 of Lyon" },
    { user: "loc-none", locale: null, subject: "Hello", body: "Hello Zoë &lt;3 of Lyon" },
  ];
  for (const c of cases) {
    await seedUser(database, c.user, { locale: c.locale });
    const { message } = await route({ user_id: c.user, template_id: "greet", template_version: 2, data });
    const [item] = await itemsOf(message.notification_id);
    t.match(item?.item, { subject: c.subject, body: c.body }, `locale ${c.locale}`);
  }
  await seedUser(database, "loc-v1");
  const pinned = await route({ user_id: "loc-v1", template_id: "greet", template_version: 1, data: { name: "Ada" } });
  t.match(
    (await itemsOf(pinned.message.notification_id))[0]?.item,
    { subject: "v1", body: "v1 Ada" },
    "version 1 stays",
  );
  const latest = await route({ user_id: "loc-v1", template_id: "greet", data });
  t.match((await itemsOf(latest.message.notification_id))[0]?.item, { subject: "Hello" }, "no pin: the latest");

  const failures = await route({
    user_id: "loc-v1",
    template_id: "greet",
    template_version: 2,
    data: { name: "x" },
    channels: ["email", "sms", "push"],
  });
  t.same(failures.channels, {
    email: { status: "failed", reason: "template_data_invalid", at: null },
    push: { status: "failed", reason: "template_data_invalid", at: null },
    sms: { status: "failed", reason: "template_data_invalid", at: null },
  });
  const noVariant = await route({
    user_id: "loc-v1",
    template_id: "greet",
    template_version: 2,
    data,
    channels: ["push", "sms"],
  });
  t.same(noVariant.channels, {
    push: { status: "failed", reason: "no_template_variant", at: null },
    sms: { status: "failed", reason: "render_failed", at: null },
  });
  const unknown = await route({ user_id: "loc-v1", template_id: "nope" });
  t.same(unknown.channels, { email: { status: "failed", reason: "unknown_template", at: null } });
});

t.test("a redelivered lane message routes once: same rows, one work item, one count", async (t) => {
  await seedUser(database, "redeliver-1", { rate_cap_per_day: 5 });
  const { message, outcome } = await route({ user_id: "redeliver-1", channels: ["email", "sms"] });
  t.equal(outcome, "routed");
  t.equal(await routeNotification(lane, message), "duplicate");
  t.equal(await routeNotification(lane, message), "duplicate");
  const items = await itemsOf(message.notification_id);
  t.same(items.map((i) => i.item.channel).sort(), ["email", "sms"], "one item per channel (msg id dedup)");
  const [count] = await database.sql`select count from promotional_daily_counts where user_id = 'redeliver-1'`;
  t.equal(count?.count, 1, "counted once");

  // A crash after the commit but before the publish: the redelivery publishes what is pending.
  const [lost] = await storeNotifications(database, bus, [{ user_id: "redeliver-1" }]);
  if (!lost) throw new Error("not stored");
  await database.sql`insert into notification_channels (notification_id, channel, status) values (${lost.notification_id}, 'email', 'pending')`;
  await seedUser(database, "redeliver-1", { rate_cap_per_day: 5, channel_optout: ["email"] });
  t.equal(await routeNotification(lane, lost), "duplicate");
  t.equal((await itemsOf(lost.notification_id)).length, 1, "the recorded decision wins over today's preferences");
});

t.test("a notification withdrawn by ingest before routing is gone, not an error", async (t) => {
  const [message] = await storeNotifications(database, bus, [{ user_id: "gone-1" }]);
  if (!message) throw new Error("not stored");
  await database.sql`delete from notifications where id = ${message.notification_id}`;
  t.equal(await routeNotification(lane, message), "gone");
});
