import { createHmac, generateKeyPairSync, randomUUID, sign } from "node:crypto";
import { createAttemptThrottle } from "@notify/http";
import { captureLogger, freshBus, freshDatabase } from "@notify/testing";
import t from "tap";
import { createApp } from "../src/app.js";

// Provider webhooks are public, and a provider posts every account's webhooks from the same
// shared addresses: anyone who points their own SendGrid or Plivo account at this URL makes those
// addresses fail signatures. Failures spend the address's budget, but a post whose signature
// verifies is never refused for them: an address out of attempts is still read and verified
// (through the over-budget reads), and a genuine post from it is answered at once.

const PLIVO_TOKEN = "plivo-preauth-token";
const sendgridKeys = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
// Someone else's SendGrid account, pointed at this URL: its posts are signed, by another key.
const strangerKeys = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const { database } = await freshDatabase(t);
const bus = await freshBus(t);
const app = createApp({
  database,
  bus,
  log: captureLogger("receipts").log,
  isStopping: () => false,
  plivoAuthToken: PLIVO_TOKEN,
  sendgridPublicKey: sendgridKeys.publicKey.export({ format: "der", type: "spki" }).toString("base64"),
  preauthThrottle: createAttemptThrottle({ perSecond: 0.5, burst: 3 }),
});
const from = (address: string) => ({ incoming: { socket: { remoteAddress: address } } });

const plivoUrl = "http://localhost/webhooks/plivo";
const plivoReport = (address: string, token: string) => {
  const params = { MessageUUID: randomUUID(), Status: "delivered" };
  const nonce = randomUUID();
  const sorted = Object.entries(params)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => k + v)
    .join("");
  const signature = createHmac("sha256", token).update(`${plivoUrl}?${sorted}.${nonce}`).digest("base64");
  return app.request(
    plivoUrl,
    {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        "x-plivo-signature-v3": signature,
        "x-plivo-signature-v3-nonce": nonce,
      },
      body: new URLSearchParams(params),
    },
    from(address),
  );
};

const sendgridPost = (address: string, key: typeof sendgridKeys.privateKey) => {
  const body = Buffer.from(
    JSON.stringify([
      {
        email: "ada@example.com",
        timestamp: 1_700_000_000,
        event: "delivered",
        sg_event_id: randomUUID(),
        sg_message_id: `${randomUUID()}.filterdrecv-1`,
      },
    ]),
  );
  const timestamp = String(Math.floor(Date.now() / 1000));
  return app.request(
    "http://localhost/webhooks/sendgrid",
    {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-twilio-email-event-webhook-signature": sign(
          "sha256",
          Buffer.concat([Buffer.from(timestamp), body]),
          key,
        ).toString("base64"),
        "x-twilio-email-event-webhook-timestamp": timestamp,
      },
      body,
    },
    from(address),
  );
};

/** How many times each status occurs. */
const tally = (statuses: number[]) => {
  const counts: Record<number, number> = {};
  for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
};

t.test("SendGrid: 2,000 posts signed by another key from one address, then SendGrid's own: 200", async (t) => {
  const address = "192.0.2.60";
  t.equal((await sendgridPost("192.0.2.70", sendgridKeys.privateKey)).status, 200);
  const statuses: number[] = [];
  for (let i = 0; i < 2000; i++) statuses.push((await sendgridPost(address, strangerKeys.privateKey)).status);
  t.same(tally(statuses), { 401: 2000 }, "each is read and refused for its signature (one read at a time)");
  const genuine = await sendgridPost(address, sendgridKeys.privateKey);
  t.equal(genuine.status, 200, "the signed post is processed");
  t.match(await genuine.json(), { events: 1, accepted: 1 });
});

t.test("Plivo: 2,000 reports signed with another token from one address, then Plivo's own: 200", async (t) => {
  const address = "192.0.2.61";
  t.equal((await plivoReport("192.0.2.71", PLIVO_TOKEN)).status, 200);
  const statuses: number[] = [];
  for (let i = 0; i < 2000; i++) statuses.push((await plivoReport(address, "someone-elses-token")).status);
  t.same(tally(statuses), { 401: 2000 });
  const genuine = await plivoReport(address, PLIVO_TOKEN);
  t.equal(genuine.status, 200, "the signed report is processed");
});

t.test("valid posts spend nothing; another address is not affected by one out of attempts", async (t) => {
  for (let i = 0; i < 10; i++) t.equal((await plivoReport("192.0.2.62", PLIVO_TOKEN)).status, 200);
  for (let i = 0; i < 5; i++) t.equal((await plivoReport("192.0.2.62", "wrong")).status, 401);
  t.equal((await plivoReport("192.0.2.63", PLIVO_TOKEN)).status, 200);
  t.equal((await plivoReport("192.0.2.62", PLIVO_TOKEN)).status, 200);
});
