import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import {
  formParams,
  SENDGRID_SIGNATURE_HEADER,
  SENDGRID_TIMESTAMP_HEADER,
  sendgridPublicKey,
  verifyPlivoSignature,
  verifySendgridSignature,
} from "@notify/providers";
import t from "tap";
import { startPlivoSandbox, startSendgridSandbox } from "../../src/index.js";
import { startReceiver } from "./receiver.js";

// The control routes that play what providers report about an address: SendGrid's events about
// an address (signed with the sandbox's key) and a phone's message to a Plivo number (signed V3).

const receiver = await startReceiver(t);
const sendgrid = await startSendgridSandbox({ eventWebhookUrl: `${receiver.origin}/webhooks/sendgrid` });
const unwired = await startSendgridSandbox();
t.teardown(async () => {
  await sendgrid.close();
  await unwired.close();
});
const key = sendgridPublicKey(sendgrid.webhookPublicKey);

const postJson = (url: string, body: unknown) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

t.test("SendGrid: each address event is posted signed, with SendGrid's fields", async (t) => {
  const cases = [
    [{ event: "bounce" }, { event: "bounce", type: "bounce", status: "5.1.1" }],
    [
      { event: "bounce", type: "blocked" },
      { event: "bounce", type: "blocked", status: "4.7.1" },
    ],
    [{ event: "dropped" }, { event: "dropped", reason: "Bounced Address" }],
    [
      { event: "dropped", reason: "Spam Reporting Address" },
      { event: "dropped", reason: "Spam Reporting Address" },
    ],
    [{ event: "spamreport" }, { event: "spamreport" }],
    [{ event: "unsubscribe" }, { event: "unsubscribe" }],
    [{ event: "group_unsubscribe" }, { event: "group_unsubscribe", asm_group_id: 1 }],
  ] as const;
  for (const [request, expected] of cases) {
    const before = receiver.posts.length;
    const res = await postJson(`${sendgrid.url}/sandbox/address-events`, { email: "ada@example.com", ...request });
    t.equal(res.status, 200, JSON.stringify(request));
    const answer = (await res.json()) as { answer: number; events: Array<Record<string, unknown>> };
    t.equal(answer.answer, 200);
    t.equal(receiver.posts.length, before + 1, "one post");
    const post = receiver.posts.at(-1);
    if (post === undefined) throw new Error("no post");
    const signature = post.headers[SENDGRID_SIGNATURE_HEADER.toLowerCase()] as string;
    const timestamp = post.headers[SENDGRID_TIMESTAMP_HEADER.toLowerCase()] as string;
    t.ok(verifySendgridSignature(key, signature, timestamp, Buffer.from(post.body)), "signed with the sandbox's key");
    const [event] = JSON.parse(post.body) as Array<Record<string, unknown>>;
    t.match(event, { email: "ada@example.com", sg_event_id: String, timestamp: Number, ...expected });
    t.notOk("sg_message_id" in (event ?? {}), "no send named: none");
    t.same(answer.events, [event]);
  }
  t.equal(sendgrid.eventPosts().length, cases.length, "listed with the other posts");
});

t.test("SendGrid: a message_id and notification_id name the send", async (t) => {
  const post = await sendgrid.reportAddress({
    email: "ada@example.com",
    event: "spamreport",
    message_id: "abc123",
    notification_id: "n-1",
  });
  t.match(post?.events[0], { sg_message_id: /^abc123\./, notification_id: "n-1", channel: "email" });
});

t.test("SendGrid: a bad request is a 400, no webhook URL a 409, and nothing is posted", async (t) => {
  const before = receiver.posts.length;
  for (const body of [{ email: "ada@example.com", event: "delivered" }, { email: "nope", event: "bounce" }, null]) {
    t.equal((await postJson(`${sendgrid.url}/sandbox/address-events`, body)).status, 400, JSON.stringify(body));
  }
  const res = await postJson(`${unwired.url}/sandbox/address-events`, { email: "ada@example.com", event: "bounce" });
  t.equal(res.status, 409);
  t.equal(receiver.posts.length, before);
});

// Answers inbound messages as receipts does: Plivo XML.
const inbound: Array<{ url: string; headers: Record<string, string | string[] | undefined>; body: string }> = [];
const xmlServer = createServer((req, res) => {
  let body = "";
  req.on("data", (chunk: Buffer) => {
    body += chunk.toString();
  });
  req.on("end", () => {
    const port = (xmlServer.address() as AddressInfo).port;
    inbound.push({ url: `http://127.0.0.1:${port}${req.url}`, headers: req.headers, body });
    res.writeHead(200, { "content-type": "application/xml" }).end("<Response><Message>ok</Message></Response>");
  });
});
await new Promise<void>((resolve) => xmlServer.listen(0, "127.0.0.1", resolve));
const inboundUrl = `http://127.0.0.1:${(xmlServer.address() as AddressInfo).port}/webhooks/plivo/inbound`;
const AUTH_TOKEN = "plivo-inbound-token";
const plivo = await startPlivoSandbox({ authId: "MAZDQ1ZJIYMDZKMTZKYM", authToken: AUTH_TOKEN, inboundUrl });
const plivoUnwired = await startPlivoSandbox({ authId: "MAZDQ1ZJIYMDZKMTZKYM", authToken: AUTH_TOKEN });
t.teardown(async () => {
  await plivo.close();
  await plivoUnwired.close();
  xmlServer.close();
});

t.test("Plivo: an inbound message is posted V3-signed, and the receiver's answer returned", async (t) => {
  const res = await postJson(`${plivo.url}/sandbox/inbound`, {
    from: "+14155550123",
    to: "+14155550100",
    text: "STOP",
  });
  t.equal(res.status, 200);
  const answer = (await res.json()) as { status: number; content_type: string; body: string; message_uuid: string };
  t.match(answer, {
    status: 200,
    content_type: "application/xml",
    body: "<Response><Message>ok</Message></Response>",
  });
  const post = inbound.at(-1);
  if (post === undefined) throw new Error("no post");
  const params = formParams(new URLSearchParams(post.body));
  t.same(
    { From: params.From, To: params.To, Text: params.Text, Type: params.Type, MessageUUID: params.MessageUUID },
    { From: ["14155550123"], To: ["14155550100"], Text: ["STOP"], Type: ["sms"], MessageUUID: [answer.message_uuid] },
  );
  const verdict = verifyPlivoSignature(AUTH_TOKEN, {
    method: "POST",
    url: post.url,
    params,
    headers: (name) => post.headers[name.toLowerCase()] as string | undefined,
  });
  t.equal(verdict, "v3");
  t.equal(
    verifyPlivoSignature("another-token", {
      method: "POST",
      url: post.url,
      params,
      headers: (name) => post.headers[name.toLowerCase()] as string | undefined,
    }),
    "invalid",
  );
});

t.test("Plivo: a bad request is a 400, no inbound URL a 409, and nothing is posted", async (t) => {
  const before = inbound.length;
  for (const body of [{ from: "nope", to: "+14155550100", text: "STOP" }, { from: "+14155550123" }, null]) {
    t.equal((await postJson(`${plivo.url}/sandbox/inbound`, body)).status, 400, JSON.stringify(body));
  }
  const res = await postJson(`${plivoUnwired.url}/sandbox/inbound`, {
    from: "+14155550123",
    to: "+14155550100",
    text: "STOP",
  });
  t.equal(res.status, 409);
  t.equal(inbound.length, before);
});
