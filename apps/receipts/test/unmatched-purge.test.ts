import { createHmac } from "node:crypto";
import { purgeUnmatchedReceipts } from "@notify/db";
import { MetricsRegistry } from "@notify/http";
import { eventually } from "@notify/testing";
import t from "tap";
import { newId, seedChannel, startReceipts } from "./support.js";

// Receipts that never match a send wait for the sweep, but not for ever: after
// RECEIPTS_UNMATCHED_RETENTION_HOURS the sweep deletes them. Applied ones are the dedup record and stay.

const AUTH_TOKEN = "plivo-purge-token";
const metrics = new MetricsRegistry();
const receipts = await startReceipts(
  t,
  { plivoAuthToken: AUTH_TOKEN, metrics },
  { unmatchedRetentionHours: 2, purgeEveryMs: 100 },
);
const { sql } = receipts;
const reportUrl = `${receipts.url}/webhooks/plivo`;

const report = async (messageUuid: string, status = "delivered") => {
  const params = { MessageUUID: messageUuid, Status: status };
  const nonce = newId();
  const signature = createHmac("sha256", AUTH_TOKEN)
    .update(`${reportUrl}?MessageUUID${messageUuid}Status${status}.${nonce}`)
    .digest("base64");
  const res = await fetch(reportUrl, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      "x-plivo-signature-v3": signature,
      "x-plivo-signature-v3-nonce": nonce,
    },
    body: new URLSearchParams(params),
  });
  if (res.status !== 200) throw new Error(`report answered ${res.status}`);
};

const receivedHoursAgo = (providerId: string, hours: number) =>
  sql`update provider_receipts set received_at = now() - make_interval(hours => ${hours}) where provider_id = ${providerId}`;
const kept = async (providerId: string) =>
  Number((await sql`select count(*)::int as n from provider_receipts where provider_id = ${providerId}`)[0]?.n);

t.test("the sweep deletes unmatched receipts older than the retention, and only those", async (t) => {
  const stale = newId();
  const recent = newId();
  const applied = newId();
  await seedChannel(sql, { channel: "sms", status: "delivered", provider: "plivo", providerId: applied });
  await report(stale, "failed");
  await report(recent, "failed");
  await report(applied, "failed");
  await receivedHoursAgo(stale, 3);
  await receivedHoursAgo(recent, 1);
  await receivedHoursAgo(applied, 48);

  await eventually(async () => ((await kept(stale)) === 0 ? true : undefined), 5000, "stale unmatched receipt purged");
  t.equal(await kept(recent), 1, "an unmatched receipt inside the retention is kept for the sweep");
  t.equal(await kept(applied), 1, "an applied receipt is kept (dedup)");
  t.match(await metrics.render(), /notify_receipts_unmatched_purged_total 1\b/);

  // A purged receipt posted again (a provider retrying very late) is stored again, not lost.
  await report(stale, "failed");
  t.equal(await kept(stale), 1);
});

t.test("purgeUnmatchedReceipts works in bounded batches", async (t) => {
  const ids = Array.from({ length: 5 }, () => newId());
  for (const id of ids) await report(id);
  await sql`update provider_receipts set received_at = now() - interval '10 hours' where provider_id = any(${ids})`;
  // Races with the sweep's own purge: together they delete all five, each at most its limit.
  let deleted = 0;
  for (let i = 0; i < 5 && deleted < 5; i++) {
    const batch = await purgeUnmatchedReceipts(sql, { olderThanHours: 2, limit: 2 });
    t.ok(batch <= 2);
    deleted += batch;
    if (batch === 0) break;
  }
  await eventually(async () => {
    const [left] = await sql`select count(*)::int as n from provider_receipts where provider_id = any(${ids})`;
    return left?.n === 0 ? true : undefined;
  });
});
