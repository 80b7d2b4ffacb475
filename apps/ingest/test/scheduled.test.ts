import { randomUUID } from "node:crypto";
import { localDate, wallTime } from "@notify/core";
import { seedApiKey } from "@notify/db";
import { settled } from "@notify/testing";
import t, { type Test } from "tap";
import { ingestApp, laneMessagesFor } from "./support.js";

// Scheduled sends at ingest: send_at, or send_at_local resolved in the user's time zone when the
// request is accepted, checked against the deadline, stored with the notification, carried on
// its lane message and shown by GET.
const { app, database, bus } = await ingestApp(t, { maxBodyBytes: 65_536 });
const admin = await seedApiKey(database, { clientId: "ops", name: "admin", scopes: ["operator"] });
const ingestKey = await seedApiKey(database, { clientId: "shop", name: "ingest", scopes: ["ingest", "read"] });
const HOUR = 3_600_000;

const request = (method: string, path: string, body: unknown, headers: Record<string, string>) =>
  app.request(`/api/v1${path}`, {
    method,
    headers: { "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
const send = (body: Record<string, unknown>, userId = "u1") =>
  request(
    "POST",
    "/notifications",
    {
      user_id: userId,
      category: "security",
      template_id: "otp",
      data: { name: "Ada" },
      priority: "transactional",
      ...body,
    },
    { "x-api-key": ingestKey, "idempotency-key": randomUUID() },
  );
const rows = async () => Number((await database.sql`select count(*)::int as n from notifications`)[0]?.n);
const stored = async (id: string) =>
  (
    await database.sql<{ send_at: Date | null; deliver_by: Date | null }[]>`
      select send_at, deliver_by from notifications where id = ${id}`
  )[0];
const setZones = (userId: string, timeZone: string | null, quietTz: string | null) =>
  database.sql`
    insert into user_preferences (user_id, time_zone, quiet_hours)
    values (${userId}, ${timeZone}, ${quietTz === null ? null : database.sql.json({ start: "23:00", end: "06:00", tz: quietTz })})
    on conflict (user_id) do update set time_zone = excluded.time_zone, quiet_hours = excluded.quiet_hours`;

async function accepted(t: Test, response: Response): Promise<string> {
  t.equal(response.status, 202, await response.clone().text());
  const { notification_id } = (await response.json()) as { notification_id: string };
  return notification_id;
}

async function expectInvalid(t: Test, response: Response, field: string, message: RegExp) {
  t.equal(response.status, 400);
  t.match(response.headers.get("content-type"), /application\/problem\+json/);
  const body = (await response.json()) as { code: string; errors: Array<{ field: string; message: string }> };
  t.equal(body.code, "validation_failed");
  t.match(body.errors, [{ field, message }]);
}

t.before(async () => {
  const template = await request(
    "PUT",
    "/templates/otp",
    {
      params: ["name"],
      ttl_seconds: 300,
      variants: [{ channel: "sms", locale: "en", body_template: "Code for <%= it.name %>" }],
    },
    { "x-api-key": admin },
  );
  if (template.status !== 201) throw new Error(`template: ${template.status}`);
});

t.test("send_at is stored, carried on the lane message and shown; the time to live counts from it", async (t) => {
  const at = new Date(Math.ceil((Date.now() + 2 * HOUR) / 1000) * 1000);
  const id = await accepted(t, await send({ send_at: at.toISOString().replace("Z", "+00:00") }));
  const row = await stored(id);
  t.equal(row?.send_at?.toISOString(), at.toISOString());
  t.equal(row?.deliver_by?.toISOString(), new Date(at.getTime() + 300_000).toISOString(), "ttl from the send time");
  t.equal((await laneMessagesFor(bus, id))[0]?.send_at, at.toISOString());
  const view = await request("GET", `/notifications/${id}`, undefined, { "x-api-key": ingestKey });
  t.match(await view.json(), { send_at: at.toISOString(), send_at_local: null });
  await settled(database, id);
});

t.test("send_at must come before deliver_by, lie within a year, and not come with send_at_local", async (t) => {
  const before = await rows();
  const at = new Date(Date.now() + 2 * HOUR).toISOString();
  await expectInvalid(
    t,
    await send({ send_at: at, deliver_by: new Date(Date.now() + HOUR).toISOString() }),
    "send_at",
    /before deliver_by/,
  );
  await expectInvalid(t, await send({ send_at: at, deliver_by: at }), "send_at", /before deliver_by/);
  await expectInvalid(
    t,
    await send({ send_at: new Date(Date.now() + 366 * 24 * HOUR).toISOString() }),
    "send_at",
    /at most 365 days/,
  );
  await expectInvalid(t, await send({ send_at: "tomorrow at nine" }), "send_at", /RFC 3339/);
  await expectInvalid(t, await send({ send_at: at, send_at_local: { time: "09:00" } }), "send_at_local", /send_at/);
  await expectInvalid(t, await send({ send_at_local: { time: "24:00" } }), "send_at_local.time", /HH:MM/);
  await expectInvalid(
    t,
    await send({ send_at_local: { time: "09:00", date: "2027-02-30" } }),
    "send_at_local.date",
    /calendar date/,
  );
  t.equal((await send({ send_at_local: { time: "09:00", zone: "UTC" } })).status, 400, "unknown fields refused");
  t.equal(await rows(), before, "nothing stored");
  const ok = await accepted(t, await send({ send_at: at, deliver_by: new Date(Date.now() + 3 * HOUR).toISOString() }));
  await settled(database, ok);
});

t.test("send_at_local is read in the user's time zone, DST-correct", async (t) => {
  await setZones("ny", "America/New_York", "Europe/London");
  // 02:30 does not exist in New York on 14 March 2027 (clocks jump from 02:00 EST to 03:00 EDT).
  const skipped = await accepted(t, await send({ send_at_local: { time: "02:30", date: "2027-03-14" } }, "ny"));
  t.equal((await stored(skipped))?.send_at?.toISOString(), "2027-03-14T07:00:00.000Z", "the jump: 03:00 EDT");
  // 01:30 happens twice on 7 November 2027: the first, EDT, is meant.
  const repeated = await accepted(t, await send({ send_at_local: { time: "01:30", date: "2027-11-07" } }, "ny"));
  t.equal((await stored(repeated))?.send_at?.toISOString(), "2027-11-07T05:30:00.000Z");
  const view = await request("GET", `/notifications/${repeated}`, undefined, { "x-api-key": ingestKey });
  t.match(await view.json(), { send_at_local: { time: "01:30", date: "2027-11-07" } });

  await setZones("quiet-only", null, "Asia/Tokyo");
  const tokyo = await accepted(t, await send({ send_at_local: { time: "09:00", date: "2027-01-05" } }, "quiet-only"));
  t.equal((await stored(tokyo))?.send_at?.toISOString(), "2027-01-05T00:00:00.000Z", "the quiet hours' zone");
  const utc = await accepted(t, await send({ send_at_local: { time: "09:00", date: "2027-01-05" } }, "nobody"));
  t.equal((await stored(utc))?.send_at?.toISOString(), "2027-01-05T09:00:00.000Z", "UTC without either");
  for (const id of [skipped, repeated, tokyo, utc]) await settled(database, id);
});

t.test("send_at_local without a date is the next time the user's clock reads it", async (t) => {
  await setZones("syd", "Australia/Sydney", null);
  const now = Date.now();
  for (const time of ["00:00", "09:00", "23:59"]) {
    const id = await accepted(t, await send({ send_at_local: { time } }, "syd"));
    const at = (await stored(id))?.send_at as Date;
    t.ok(at.getTime() > now && at.getTime() <= Date.now() + 24 * HOUR, `${time}: within the next day`);
    const wall = wallTime(at, "Australia/Sydney");
    t.equal(`${String(wall.hour).padStart(2, "0")}:${String(wall.minute).padStart(2, "0")}`, time);
    t.ok(
      [localDate(now, "Australia/Sydney"), localDate(now + 24 * HOUR, "Australia/Sydney")].includes(
        localDate(at, "Australia/Sydney"),
      ),
    );
    await settled(database, id);
  }
});
