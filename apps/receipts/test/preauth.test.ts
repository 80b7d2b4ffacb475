import { createHmac, randomUUID } from "node:crypto";
import { createAttemptThrottle } from "@notify/http";
import { captureLogger, freshBus, freshDatabase } from "@notify/testing";
import t from "tap";
import { createApp } from "../src/app.js";

// Provider webhooks are public: an address sending bad signatures is answered 429 once its
// pre-auth budget is spent, before any signature is checked; valid reports spend nothing.

const TOKEN = "plivo-preauth-token";
const { database } = await freshDatabase(t);
const bus = await freshBus(t);
const app = createApp({
  database,
  bus,
  log: captureLogger("receipts").log,
  isStopping: () => false,
  plivoAuthToken: TOKEN,
  preauthThrottle: createAttemptThrottle({ perSecond: 0.5, burst: 3 }),
});
const url = "http://localhost/webhooks/plivo";

const report = (address: string, sign: boolean) => {
  const params = { MessageUUID: randomUUID(), Status: "delivered" };
  const nonce = randomUUID();
  const sorted = Object.entries(params)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => k + v)
    .join("");
  const signature = sign ? createHmac("sha256", TOKEN).update(`${url}?${sorted}.${nonce}`).digest("base64") : "AAAA";
  return app.request(
    url,
    {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        "x-plivo-signature-v3": signature,
        "x-plivo-signature-v3-nonce": nonce,
      },
      body: new URLSearchParams(params),
    },
    { incoming: { socket: { remoteAddress: address } } },
  );
};

t.test("bad signatures from one address: 401 up to the burst, then 429 with Retry-After", async (t) => {
  for (let i = 0; i < 5; i++) t.equal((await report("192.0.2.50", true)).status, 200, "valid reports spend nothing");
  for (let i = 0; i < 3; i++) t.equal((await report("192.0.2.50", false)).status, 401);
  const limited = await report("192.0.2.50", false);
  t.equal(limited.status, 429);
  t.equal(limited.headers.get("content-type"), "application/problem+json");
  t.ok(Number(limited.headers.get("retry-after")) >= 1);
  t.equal((await report("192.0.2.50", true)).status, 429, "the address waits, whatever it sends");
  t.equal((await report("192.0.2.51", true)).status, 200, "another address is not affected");
});
