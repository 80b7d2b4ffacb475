import { answerRequests, requestReply } from "@notify/bus";
import type { DeadLetter, DeadLetterClass } from "@notify/core";
import { seedApiKey } from "@notify/db";
import { readDeadLetters } from "@notify/ops";
import fc from "fast-check";
import t from "tap";
import type { DeadLetterSummary } from "../src/dead-letters/schemas.js";
import { deadLetterResponder, ingestApp } from "./support.js";

// GET /api/v1/dead-letters: ingest asks a processor (notify.ops.dlq.list), whose responder runs
// here on the same database and namespace; ingest's own NATS user reads no stream.
const { app, database, bus, log } = await ingestApp(t);
const root = t;
let responder = await deadLetterResponder(root, { database, bus, log });
const admin = await seedApiKey(database, { clientId: "ops", name: "operator", scopes: ["operator"] });
const reader = await seedApiKey(database, { clientId: "shop", name: "reader", scopes: ["read"] });

const letter = (n: number, channel: "email" | "sms", cls: DeadLetterClass): DeadLetter => ({
  version: 1,
  class: cls,
  reason: `reason ${n}`,
  channel,
  lane: "promotional",
  provider: channel === "email" ? "sendgrid" : "plivo",
  attempts: 5,
  notification: null,
  item: {
    notification_id: `n-${n}`,
    channel,
    priority: "promotional",
    user_id: `u-${n}`,
    category: "news",
    to: "x",
    subject: null,
    body: "b",
    attempt: 5,
  },
  history: [],
  dead_lettered_at: new Date().toISOString(),
});
for (let n = 1; n <= 7; n++) {
  const channel = n % 2 ? "email" : "sms";
  await bus.publish(
    bus.subjects.dlq(channel),
    letter(n, channel, n <= 5 ? "permanent" : "retries_exhausted"),
    `dl-${n}`,
  );
}

const get = async (query: Record<string, string> = {}, key = admin) => {
  const response = await app.request(`/api/v1/dead-letters?${new URLSearchParams(query)}`, {
    headers: { "x-api-key": key },
  });
  return {
    status: response.status,
    body: (await response.json()) as {
      data: DeadLetterSummary[];
      page: number;
      page_size: number;
      total_count: number;
    },
  };
};

t.test("offset pages, newest first, with the filtered total", async (t) => {
  const first = await get({ page_size: "3" });
  t.equal(first.status, 200);
  t.same(
    first.body.data.map((d) => d.notification_id),
    ["n-7", "n-6", "n-5"],
  );
  t.match(first.body, { page: 1, page_size: 3, total_count: 7 });
  t.same(
    (await get({ page_size: "3", page: "3" })).body.data.map((d) => d.notification_id),
    ["n-1"],
  );
  t.same((await get({ page: "9" })).body.data, []);
  t.equal((await get({ page_size: "5000" })).body.page_size, 200, "clamped");
  const email = await get({ channel: "email", class: "permanent" });
  t.same(
    email.body.data.map((d) => d.notification_id),
    ["n-5", "n-3", "n-1"],
  );
  t.equal(email.body.total_count, 3);
  t.match(email.body.data[0], { channel: "email", class: "permanent", provider: "sendgrid", user_id: "u-5" });
  t.equal((await get({ notification_id: "n-4" })).body.total_count, 1);
  for (const query of [
    { page: "0" } as Record<string, string>,
    { page_size: "-1" },
    { channel: "fax" },
    { class: "lost" },
    { since: "x" },
    // A day the calendar lacks is refused, not read as one of the next month.
    { since: "2026-02-30T00:00:00Z" },
    { until: "2026-04-31T00:00:00Z" },
  ]) {
    t.equal((await get(query)).status, 400, JSON.stringify(query));
  }
});

t.test("a time filter at the edge of the years 0001-9999, any offset, is 200 or 400, never 5xx", async (t) => {
  // 9999-12-31T23:00:00-05:00 is past the year 9999 in UTC, 0000-01-01T00:30:00+01:00 before
  // year 1: neither JetStream's start time nor Postgres takes them.
  for (const [query, status] of [
    [{ until: "9999-12-31T23:00:00-05:00" }, 400],
    [{ since: "0000-01-01T00:30:00+01:00" }, 400],
    [{ until: "9999-12-31T23:59:59.998Z" }, 200],
    [{ since: "0001-01-01T00:00:00Z", until: "9999-12-31T23:59:59.998Z" }, 200],
  ] as const) {
    const { status: got, body } = await get(query);
    t.equal(got, status, JSON.stringify(query));
    if (got === 200) t.equal(body.total_count, 7, "every letter lies in the widest window");
  }
  const edge = fc
    .tuple(
      fc.constantFrom("0000-01-01", "0001-01-01", "1969-12-31", "9999-12-31"),
      fc.constantFrom("00:00:00", "00:30:00", "23:00:00", "23:59:59.999"),
      fc.constantFrom("Z", "+01:00", "-05:00", "+14:00", "-12:00"),
    )
    .map(([day, time, offset]) => `${day}T${time}${offset}`);
  await fc.assert(
    fc.asyncProperty(fc.constantFrom("since", "until"), edge, async (field, value) => {
      const { status } = await get({ [field]: value });
      return status === 200 || status === 400;
    }),
    { numRuns: 40 },
  );
});

t.test("each letter as stored, field for field, in the route's order", async (t) => {
  const stored = (await readDeadLetters(bus, {})).reverse();
  const expected = {
    data: stored.slice(0, 4).map(({ seq, time, letter }) => ({
      seq,
      dead_lettered_at: time.toISOString(),
      channel: letter.channel,
      lane: letter.lane,
      class: letter.class,
      reason: letter.reason,
      provider: letter.provider,
      attempts: letter.attempts,
      notification_id: letter.item.notification_id,
      client_id: letter.notification?.client_id ?? null,
      user_id: letter.item.user_id,
    })),
    page: 1,
    page_size: 4,
    total_count: 7,
  };
  const response = await app.request("/api/v1/dead-letters?page_size=4", { headers: { "x-api-key": admin } });
  t.equal(response.status, 200);
  t.equal(response.headers.get("content-type"), "application/json");
  t.equal(await response.text(), JSON.stringify(expected), "the same bytes ingest answered when it read the stream");
});

t.test("no processor answering, or none in time, is a 503 with Retry-After", async (t) => {
  await responder.stop();
  const none = await app.request("/api/v1/dead-letters", { headers: { "x-api-key": admin } });
  t.equal(none.status, 503);
  t.match(await none.json(), { code: "dependency_unavailable" });
  t.ok(Number(none.headers.get("retry-after")) >= 1, "Retry-After");
  responder = await deadLetterResponder(root, { database, bus, log });
  t.equal((await get()).status, 200, "answered again");

  // A processor too slow to answer: ingest stops waiting at its timeout.
  const slow = await ingestApp(t, { database, deadLetterTimeoutMs: 300 });
  // The processor answers only once the test lets it, after ingest has answered its caller.
  let letAnswer = () => {};
  const answerLet = new Promise<void>((resolve) => {
    letAnswer = resolve;
  });
  let processorAnswered = false;
  const late = answerRequests(slow.bus, slow.bus.subjects.opsDlqList, "slow", async () => {
    await answerLet;
    processorAnswered = true;
    return { ok: true, value: {} };
  });
  t.teardown(() => {
    letAnswer();
    return late.stop();
  });
  await late.ready;
  const timedOut = await slow.app.request("/api/v1/dead-letters", { headers: { "x-api-key": admin } });
  t.equal(timedOut.status, 503);
  t.match(await timedOut.json(), { code: "dependency_unavailable" });
  t.ok(Number(timedOut.headers.get("retry-after")) >= 1, "Retry-After");
  t.notOk(processorAnswered, "answered at the timeout, not when the processor got to it");
  letAnswer();
});

t.test("the processor validates what it is asked, whoever asks", async (t) => {
  const ask = (body: unknown) => requestReply(bus, bus.subjects.opsDlqList, body, 5000);
  t.match(await ask({ page_size: 500 }), {
    ok: false,
    error: { code: "validation_failed", fields: [{ field: "page_size" }] },
  });
  t.match(await ask({ channel: "fax", extra: 1 }), {
    ok: false,
    error: { code: "validation_failed", fields: [{ field: "channel" }, { field: "extra" }] },
  });
  t.match(await ask({}), { ok: true, value: { page: 1, page_size: 50, total_count: 7 } }, "the API's defaults");
});

t.test("the operator scope only", async (t) => {
  t.equal((await get({}, reader)).status, 403);
  t.equal((await app.request("/api/v1/dead-letters")).status, 401);
});
