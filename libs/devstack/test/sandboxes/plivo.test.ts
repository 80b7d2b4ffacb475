import { createHmac, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import {
  createPlivoProvider,
  formParams,
  type OutboundMessage,
  type PlivoConfig,
  plivoSignatureV3,
  verifyPlivoSignature,
} from "@notify/providers";
import plivo from "plivo";
import t from "tap";
import { startPlivoSandbox } from "../../src/index.js";

const AUTH_ID = "MAZDQ1ZJIYMDZKMTZKYM";
const AUTH_TOKEN = "plivo-sandbox-token";

interface Received {
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
}
const received: Received[] = [];
const receiver = createServer((req, res) => {
  let body = "";
  req.on("data", (chunk: Buffer) => {
    body += chunk.toString();
  });
  req.on("end", () => {
    received.push({
      url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}${req.url}`,
      headers: req.headers,
      body,
    });
    res.end();
  });
});
await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
const reportUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks/plivo`;

const sandbox = await startPlivoSandbox({ authId: AUTH_ID, authToken: AUTH_TOKEN });
t.teardown(async () => {
  await sandbox.close();
  receiver.close();
});
t.beforeEach(async () => {
  await sandbox.settled();
  sandbox.reset();
  received.length = 0;
});

const provider = (overrides: Partial<PlivoConfig> = {}) =>
  createPlivoProvider({
    authId: AUTH_ID,
    authToken: AUTH_TOKEN,
    baseUrl: sandbox.url,
    from: "+14155550100",
    reportUrl,
    timeoutMs: 2000,
    ...overrides,
  });

const message = (overrides: Partial<OutboundMessage> = {}): OutboundMessage => ({
  notificationId: randomUUID(),
  channel: "sms",
  to: "+447700900123",
  subject: null,
  body: "Your code is 123456",
  category: "otp",
  priority: "transactional",
  ...overrides,
});

// Computed from Plivo's documented algorithm, not from our signing code.
const handV2 = (url: string, nonce: string) =>
  createHmac("sha256", AUTH_TOKEN)
    .update(url + nonce)
    .digest("base64");

t.test("sends through the plivo SDK; signed delivery reports follow", async (t) => {
  const msg = message();
  const result = await provider().send(msg);
  const [sent] = sandbox.messages();
  if (!sent) throw new Error("the sandbox received nothing");
  t.same(result, { outcome: "accepted", providerId: sent.message_uuid });
  t.equal(sent.dst, "+447700900123");
  t.equal(sent.src, "+14155550100");
  t.equal(sent.text, "Your code is 123456");
  t.equal(sent.url, `${reportUrl}?notification_id=${msg.notificationId}`);

  await sandbox.settled();
  t.same(
    received.map((r) => new URLSearchParams(r.body).get("Status")),
    ["sent", "delivered"],
  );
  for (const report of received) {
    const body = new URLSearchParams(report.body);
    t.equal(body.get("MessageUUID"), sent.message_uuid);
    const nonce = String(report.headers["x-plivo-signature-v2-nonce"]);
    t.equal(report.headers["x-plivo-signature-v2"], handV2(reportUrl, nonce), "V2 covers the URL without its query");
    const v3Nonce = String(report.headers["x-plivo-signature-v3-nonce"]);
    const sortedParams = [...body]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([k, value]) => k + value)
      .join("");
    const v3Base = `${report.url.replace(/\?.*/, "")}?notification_id=${msg.notificationId}.${sortedParams}.${v3Nonce}`;
    t.equal(report.headers["x-plivo-signature-v3"], createHmac("sha256", AUTH_TOKEN).update(v3Base).digest("base64"));
    t.ok(
      plivo.validateV3Signature(
        "POST",
        report.url,
        v3Nonce,
        AUTH_TOKEN,
        String(report.headers["x-plivo-signature-v3"]),
        Object.fromEntries(body),
      ),
      "the SDK agrees",
    );
  }
});

t.test("a carrier failure is reported as undelivered with its error code", async (t) => {
  sandbox.fault({ report_status: "undelivered", error_code: "20", times: 1 });
  const result = await provider().send(message());
  t.equal(result.outcome, "accepted");
  await sandbox.settled();
  const final = new URLSearchParams(received.at(-1)?.body);
  t.equal(final.get("Status"), "undelivered");
  t.equal(final.get("ErrorCode"), "20");
});

t.test("failures are classified although the SDK loses 429 and 503", async (t) => {
  const cases: Array<[number, "transient" | "permanent"]> = [
    [429, "transient"],
    [503, "transient"],
    [500, "transient"],
    [400, "permanent"],
    [404, "permanent"],
  ];
  for (const [status, outcome] of cases) {
    sandbox.fault({ status, times: 1, retry_after_seconds: 3 });
    const result = await provider().send(message());
    t.match(result, { outcome, status }, `${status} is ${outcome}`);
  }
  t.equal(sandbox.messages().length, 0);
});

t.test("a wrong token is permanent; a bad number never reaches Plivo", async (t) => {
  t.match(await provider({ authToken: "wrong" }).send(message()), { outcome: "permanent", status: 401 });
  t.match(await provider().send(message({ to: "07700900123" })), { outcome: "permanent", reason: /E\.164/ });
  t.equal(sandbox.messages().length, 0);
});

t.test("slow or unreachable Plivo is transient", async (t) => {
  sandbox.fault({ delay_ms: 1500, times: 1 });
  const slow = await provider({ timeoutMs: 300 }).send(message());
  t.match(slow, { outcome: "transient", reason: /timed out/ });
  t.notOk("notSent" in slow, "a timeout may have been accepted: not marked as never sent");
  t.match(await provider({ baseUrl: "http://127.0.0.1:1" }).send(message()), {
    outcome: "transient",
    reason: /unreachable: ECONNREFUSED/,
    notSent: true,
  });
});

t.test("signature verification: V3 with several signatures, V2, tampering", async (t) => {
  const url = "https://notify.example/webhooks/plivo?notification_id=n1&a=2";
  const params = formParams(new URLSearchParams({ Status: "delivered", MessageUUID: "m1" }));
  const nonce = "12345";
  const base = "https://notify.example/webhooks/plivo?a=2&notification_id=n1.MessageUUIDm1Statusdelivered.12345";
  const good = createHmac("sha256", AUTH_TOKEN).update(base).digest("base64");
  t.equal(plivoSignatureV3(AUTH_TOKEN, "POST", url, params, nonce), good);
  const headers = (h: Record<string, string>) => (name: string) => h[name];
  const verify = (h: Record<string, string>, p = params) =>
    verifyPlivoSignature(AUTH_TOKEN, { method: "POST", url, params: p, headers: headers(h) });
  t.equal(verify({ "x-plivo-signature-v3": `bogus,${good}`, "x-plivo-signature-v3-nonce": nonce }), "v3");
  t.equal(
    verify({ "x-plivo-signature-v3": good, "x-plivo-signature-v3-nonce": nonce }, { ...params, Status: ["failed"] }),
    "invalid",
  );
  const v2 = handV2("https://notify.example/webhooks/plivo", nonce);
  t.equal(verify({ "x-plivo-signature-v2": v2, "x-plivo-signature-v2-nonce": nonce }), "v2");
  t.equal(verify({ "x-plivo-signature-v2": v2, "x-plivo-signature-v2-nonce": "other" }), "invalid");
  t.equal(verify({}), "missing");
});
