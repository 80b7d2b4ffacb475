import { createHmac } from "node:crypto";
import { startPlivoSandbox } from "@notify/devstack";
import { createPlivoProvider } from "@notify/providers";
import { eventually } from "@notify/testing";
import t from "tap";
import { channelRow, newId, recordSend, seedChannel, startReceipts } from "./support.js";

const AUTH_ID = "MAZDQ1ZJIYMDZKMTZKYM";
const AUTH_TOKEN = "plivo-receipts-token";

const receipts = await startReceipts(t, { plivoAuthToken: AUTH_TOKEN });
const { sql } = receipts;
const reportUrl = `${receipts.url}/webhooks/plivo`;
const sandbox = await startPlivoSandbox({ authId: AUTH_ID, authToken: AUTH_TOKEN });
t.teardown(() => sandbox.close());

const provider = createPlivoProvider({
  authId: AUTH_ID,
  authToken: AUTH_TOKEN,
  baseUrl: sandbox.url,
  from: "+14155550100",
  reportUrl,
  timeoutMs: 3000,
});

const sms = (notificationId: string) => ({
  notificationId,
  channel: "sms" as const,
  to: "+447700900123",
  subject: null,
  body: "Your code is 123456",
  category: "otp",
  priority: "transactional" as const,
});

/** A report signed by hand (V3 over URL, sorted params and nonce), not by our signing code. */
const postReport = (params: Record<string, string>, options: { token?: string; signature?: string | null } = {}) => {
  const nonce = newId();
  const sorted = Object.keys(params)
    .sort()
    .map((k) => k + params[k])
    .join("");
  const signature = createHmac("sha256", options.token ?? AUTH_TOKEN)
    .update(`${reportUrl}?${sorted}.${nonce}`)
    .digest("base64");
  const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded" };
  if (options.signature !== null) {
    headers["x-plivo-signature-v3"] = options.signature ?? signature;
    headers["x-plivo-signature-v3-nonce"] = nonce;
  }
  return fetch(reportUrl, { method: "POST", headers, body: new URLSearchParams(params) });
};

const storedReceipts = async () => Number((await sql`select count(*)::int as n from provider_receipts`)[0]?.n);

t.test("a sandbox report settles an unsettled SMS channel as delivered", async (t) => {
  const id = await seedChannel(sql, { channel: "sms", status: "pending" });
  const result = await provider.send(sms(id));
  if (result.outcome !== "accepted") throw new Error(`not accepted: ${result.reason}`);
  // The worker died between the send and its status write: only the receipt can settle it.
  await recordSend(sql, id, "sms", "plivo", result.providerId, "unsettled");
  const row = await eventually(async () => {
    const r = await channelRow(sql, id, "sms");
    return r?.status === "delivered" ? r : undefined;
  });
  t.equal(row.provider_id, result.providerId);
  await sandbox.settled();
  t.same(
    sandbox.reports().map((r) => r.answer),
    [200, 200],
  );
});

t.test("an undelivered report bounces a delivered channel with its error code", async (t) => {
  sandbox.fault({ report_status: "undelivered", error_code: "20", times: 1 });
  const id = await seedChannel(sql, { channel: "sms", status: "pending" });
  const result = await provider.send(sms(id));
  if (result.outcome !== "accepted") throw new Error("not accepted");
  await recordSend(sql, id, "sms", "plivo", result.providerId);
  const row = await eventually(async () => {
    const r = await channelRow(sql, id, "sms");
    return r?.status === "bounced" ? r : undefined;
  });
  t.equal(row.reason, "plivo undelivered (error 20)");
  const [events] = await sql`select count(*)::int as n from channel_status_events where notification_id = ${id}`;
  t.equal(events?.n, 1, "the transition is in the channel's history");
});

t.test("a repeated report is applied once; a late delivered never undoes a bounce", async (t) => {
  const uuid = newId();
  const id = await seedChannel(sql, { channel: "sms", status: "delivered", provider: "plivo", providerId: uuid });
  const failed = { MessageUUID: uuid, Status: "failed", ErrorCode: "40", To: "+447700900123", From: "+14155550100" };
  t.equal((await postReport(failed)).status, 200);
  t.equal((await postReport(failed)).status, 200, "a retried post is still acknowledged");
  t.equal((await postReport({ ...failed, Status: "delivered", ErrorCode: "" })).status, 200);
  t.match(await channelRow(sql, id, "sms"), { status: "bounced", reason: "plivo failed (error 40)" });
  const rows =
    await sql`select event_id, status, applied_at from provider_receipts where provider_id = ${uuid} order by event_id`;
  t.same(
    rows.map((r) => [r.event_id, r.status, r.applied_at !== null]),
    [
      [`${uuid}:delivered`, "delivered", true],
      [`${uuid}:failed`, "bounced", true],
    ],
  );
  const [events] = await sql`select count(*)::int as n from channel_status_events where notification_id = ${id}`;
  t.equal(events?.n, 1);
  // One log line per report: the access line, carrying what the report did.
  const logged = receipts
    .lines()
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.provider_id === uuid);
  t.same(
    logged.map((l) => [l.msg, l.route, l.status, l.state, l.stored, l.duplicates]),
    [
      ["request", "/webhooks/plivo", 200, "failed", 1, 0],
      ["request", "/webhooks/plivo", 200, "failed", 0, 1],
      ["request", "/webhooks/plivo", 200, "delivered", 1, 0],
    ],
  );
});

t.test("a report for a send not recorded yet is kept and applied once it is", async (t) => {
  const uuid = newId();
  const id = await seedChannel(sql, { channel: "sms", status: "pending" });
  t.equal((await postReport({ MessageUUID: uuid, Status: "undelivered", ErrorCode: "30" })).status, 200);
  const [kept] = await sql`select applied_at from provider_receipts where provider_id = ${uuid}`;
  t.equal(kept?.applied_at, null);
  await recordSend(sql, id, "sms", "plivo", uuid);
  const row = await eventually(async () => {
    const r = await channelRow(sql, id, "sms");
    return r?.status === "bounced" ? r : undefined;
  });
  t.equal(row.reason, "plivo undelivered (error 30)");
});

t.test("a missing or wrong signature is refused and nothing is stored", async (t) => {
  const before = await storedReceipts();
  const params = { MessageUUID: newId(), Status: "delivered" };
  const missing = await postReport(params, { signature: null });
  t.equal(missing.status, 401);
  t.equal(missing.headers.get("content-type"), "application/problem+json");
  t.equal((await postReport(params, { token: "another-token" })).status, 401);
  t.equal((await postReport(params, { signature: "AAAA" })).status, 401);
  t.equal(await storedReceipts(), before);
});

t.test("a signed report without MessageUUID is a 400", async (t) => {
  const res = await postReport({ Status: "delivered" });
  t.equal(res.status, 400);
  t.match(await res.json(), { code: "validation_failed", errors: [{ field: "MessageUUID" }] });
});

t.test("a V3-signed report binds an unsettled channel whose send was never recorded", async (t) => {
  const id = await seedChannel(sql, { channel: "sms", status: "pending" });
  const result = await provider.send(sms(id));
  if (result.outcome !== "accepted") throw new Error("not accepted");
  // The worker died after Plivo accepted: the redelivery found the claim and left it unsettled, no provider id.
  await sql`update notification_channels set status = 'unsettled' where notification_id = ${id}`;
  const row = await eventually(async () => {
    const r = await channelRow(sql, id, "sms");
    return r?.status === "delivered" ? r : undefined;
  });
  t.equal(row.provider_id, result.providerId);
});

t.test("a V2-only report is refused, even correctly signed, and nothing is stored or bound", async (t) => {
  const before = await storedReceipts();
  const id = await seedChannel(sql, { channel: "sms", status: "unsettled" });
  const uuid = newId();
  const url = `${reportUrl}?notification_id=${id}`;
  const nonce = "98765";
  const v2 = createHmac("sha256", AUTH_TOKEN)
    .update(reportUrl + nonce)
    .digest("base64");
  const res = await fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      "x-plivo-signature-v2": v2,
      "x-plivo-signature-v2-nonce": nonce,
    },
    body: new URLSearchParams({ MessageUUID: uuid, Status: "delivered", notification_id: id, channel: "sms" }),
  });
  t.equal(res.status, 401);
  t.equal(res.headers.get("content-type"), "application/problem+json");
  t.match(await res.json(), { code: "unauthenticated", detail: /V3/ });
  t.equal(await storedReceipts(), before);
  t.match(await channelRow(sql, id, "sms"), { status: "unsettled", provider_id: null });
});

t.test("a valid V3 signature next to a wrong V2 one is accepted (Plivo sends both)", async (t) => {
  const uuid = newId();
  const id = await seedChannel(sql, { channel: "sms", status: "delivered", provider: "plivo", providerId: uuid });
  const params = { MessageUUID: uuid, Status: "rejected", ErrorCode: "300" };
  const nonce = newId();
  const sorted = Object.keys(params)
    .sort()
    .map((k) => k + params[k as keyof typeof params])
    .join("");
  const res = await fetch(reportUrl, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      "x-plivo-signature-v2": "AAAA",
      "x-plivo-signature-v2-nonce": "1",
      "x-plivo-signature-v3": createHmac("sha256", AUTH_TOKEN)
        .update(`${reportUrl}?${sorted}.${nonce}`)
        .digest("base64"),
      "x-plivo-signature-v3-nonce": nonce,
    },
    body: new URLSearchParams(params),
  });
  t.equal(res.status, 200);
  t.match(await channelRow(sql, id, "sms"), { status: "bounced", reason: "plivo rejected (error 300)" });
});

t.test(
  "a V3-signed report with U+0000 is never a 500: a bad id is a 400, other fields are stored repaired",
  async (t) => {
    const bad = await postReport({ MessageUUID: `${newId()}\u0000x`, Status: "delivered" });
    t.equal(bad.status, 400);
    t.match(await bad.json(), { code: "validation_failed", errors: [{ field: "MessageUUID" }] });
    const uuid = newId();
    const id = await seedChannel(sql, { channel: "sms", status: "delivered", provider: "plivo", providerId: uuid });
    const res = await postReport({ MessageUUID: uuid, Status: "failed", ErrorCode: "4\u00002", To: "+44\u0000" });
    t.equal(res.status, 200);
    t.match(await channelRow(sql, id, "sms"), { status: "bounced", reason: "plivo failed (error 4\ufffd2)" });
  },
);

t.test(
  "a signed report with parameters named like Object's own members is read as parameters, never a 500",
  async (t) => {
    for (const name of ["toString", "constructor", "__proto__", "hasOwnProperty", "valueOf"]) {
      const res = await postReport({ [name]: "delivered", MessageUUID: newId(), Status: "delivered" });
      t.equal(res.status, 200, `a parameter named ${name}`);
      await res.body?.cancel();
    }
  },
);
