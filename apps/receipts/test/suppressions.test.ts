import { createHmac, generateKeyPairSync, randomUUID, sign } from "node:crypto";
import { startPlivoSandbox, startSendgridSandbox } from "@notify/devstack";
import { MetricsRegistry } from "@notify/http";
import fc from "fast-check";
import t from "tap";
import { createApp } from "../src/app.js";
import { keywordOf, plivoReply, xmlCharacter, xmlEscape } from "../src/webhooks/plivo-inbound.js";
import { sendgridSuppressionReason } from "../src/webhooks/suppressions.js";
import { channelRow, newId, seedChannel, startReceipts } from "./support.js";

// Providers' reports about an address feed the suppression list; SMS STOP/START through
// Plivo's inbound messages. Real Postgres; the providers are their sandboxes or hand-signed posts.

const keys = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const PLIVO_TOKEN = "plivo-suppressions-token";
const OPT_OUT_REPLY = "You are unsubscribed & will get no more messages. Reply START to <resubscribe>.";
const OPT_IN_REPLY = "You are subscribed again.";
const metrics = new MetricsRegistry();
const receipts = await startReceipts(t, {
  sendgridPublicKey: keys.publicKey.export({ format: "der", type: "spki" }).toString("base64"),
  plivoAuthToken: PLIVO_TOKEN,
  smsReplies: { optOut: OPT_OUT_REPLY, optIn: OPT_IN_REPLY },
  metrics,
});
const { sql } = receipts;

const sendgrid = await startSendgridSandbox({
  eventWebhookUrl: `${receipts.url}/webhooks/sendgrid`,
  webhookPrivateKey: keys.privateKey,
});
const plivo = await startPlivoSandbox({
  authId: "MAZDQ1ZJIYMDZKMTZKYM",
  authToken: PLIVO_TOKEN,
  inboundUrl: `${receipts.url}/webhooks/plivo/inbound`,
});
t.teardown(async () => {
  await sendgrid.close();
  await plivo.close();
});

interface Entry {
  channel: string;
  address: string;
  client_id: string;
  reason: string;
  source: Record<string, string>;
}
const entriesFor = (channel: string, address: string) =>
  sql<Entry[]>`select channel, address, client_id, reason, source from suppressions
    where channel = ${channel} and address = ${address} order by client_id`;
const entryCount = async () => Number((await sql`select count(*)::int as n from suppressions`)[0]?.n);

const metric = async (labels: string) => {
  const name = "notify_receipts_suppressions_added_total";
  const line = (await metrics.render()).split("\n").find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? 0 : Number(line.split(" ").at(-1));
};

/** A fresh address, in mixed case: entries are kept normalised. */
const newEmail = () => `Ada.${newId().slice(0, 8)}@Example.com`;
/** A fresh US number, without the + (as Plivo posts numbers). */
const newNumber = () => `1415${String(Math.floor(Math.random() * 1e7)).padStart(7, "0")}`;

t.test("a bounce suppresses its address only when its classification is about the address", async (t) => {
  const bounce = (bounce_classification?: string) =>
    sendgridSuppressionReason({ event: "bounce", type: "bounce", bounce_classification });
  t.equal(bounce(), "hard_bounce", "no classification: the address's");
  t.equal(bounce("Invalid Address"), "hard_bounce");
  t.equal(bounce("Mailbox Unavailable"), "hard_bounce");
  t.equal(bounce("Unclassified"), "hard_bounce");
  for (const senders of ["Reputation", "Content", "Technical", "Frequency/Volume"]) {
    t.equal(bounce(senders), null, `${senders}: the sender's problem, not the address's`);
  }
  // Without a type the receipt reads it as a hard bounce: so does the list.
  t.equal(sendgridSuppressionReason({ event: "bounce" }), "hard_bounce", "no type: a hard bounce");
  t.equal(sendgridSuppressionReason({ event: "bounce", type: "blocked" }), null, "blocked: temporary");
  t.equal(sendgridSuppressionReason({ event: "bounce", type: "expired" }), null, "a type it does not know: none");
});

t.test("SendGrid events through the sandbox: what each puts on the list", async (t) => {
  const cases = [
    [{ event: "bounce" }, "hard_bounce"],
    [{ event: "bounce", type: "blocked" }, null],
    [{ event: "dropped" }, "hard_bounce"],
    [{ event: "dropped", reason: "Invalid" }, "hard_bounce"],
    [{ event: "dropped", reason: "Spam Reporting Address" }, "spam_complaint"],
    [{ event: "dropped", reason: "Unsubscribed Address" }, "unsubscribe"],
    [{ event: "dropped", reason: "Invalid SMTPAPI header" }, null],
    [{ event: "spamreport" }, "spam_complaint"],
    [{ event: "unsubscribe" }, "unsubscribe"],
    [{ event: "group_unsubscribe" }, "unsubscribe"],
  ] as const;
  for (const [request, reason] of cases) {
    const email = newEmail();
    const before = reason === null ? 0 : await metric(`provider="sendgrid",reason="${reason}"`);
    const post = await sendgrid.reportAddress({ email, ...request });
    t.equal(post?.answer, 200, JSON.stringify(request));
    const entries = await entriesFor("email", email.toLowerCase());
    if (reason === null) {
      t.same(entries, [], `${JSON.stringify(request)} adds nothing`);
      continue;
    }
    const event = post?.events[0];
    t.same(
      entries,
      [
        {
          channel: "email",
          address: email.toLowerCase(),
          client_id: "",
          reason,
          source: { provider: "sendgrid", event: request.event, event_id: event?.sg_event_id },
        },
      ],
      JSON.stringify(request),
    );
    t.equal(await metric(`provider="sendgrid",reason="${reason}"`), before + 1);
  }
});

/** Posts events to receipts signed with the sandbox's key over the current timestamp. */
const postEvents = async (events: unknown[]) => {
  const body = Buffer.from(JSON.stringify(events));
  const timestamp = String(Math.floor(Date.now() / 1000));
  const res = await fetch(`${receipts.url}/webhooks/sendgrid`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-twilio-email-event-webhook-signature": sign(
        "sha256",
        Buffer.concat([Buffer.from(timestamp), body]),
        keys.privateKey,
      ).toString("base64"),
      "x-twilio-email-event-webhook-timestamp": timestamp,
    },
    body,
  });
  return { status: res.status, answer: (await res.json()) as Record<string, unknown> };
};

t.test("a batch: receipts applied as before, entries added once, the first reason kept", async (t) => {
  const messageId = newId();
  const id = await seedChannel(sql, {
    channel: "email",
    status: "delivered",
    provider: "sendgrid",
    providerId: messageId,
  });
  const email = newEmail();
  const other = newEmail();
  const base = { email, timestamp: 1_700_000_000, sg_message_id: `${messageId}.filterdrecv-1.0` };
  const elsewhere = { ...base, email: other, sg_message_id: `${newId()}.filterdrecv-1.0` };
  const events = [
    { ...base, event: "spamreport", sg_event_id: newId(), notification_id: id, channel: "email" },
    { ...base, event: "unsubscribe", sg_event_id: newId() },
    { ...elsewhere, event: "bounce", type: "bounce", reason: "550 no such user", sg_event_id: newId() },
    { ...elsewhere, event: "bounce", type: "blocked", reason: "421 later", sg_event_id: newId() },
    { ...base, email: "not an address", event: "spamreport", sg_event_id: newId() },
  ];
  const first = await postEvents(events);
  t.equal(first.status, 200);
  t.match(first.answer, { events: 5, accepted: 5, stored: 5, suppressed: 2, rejected: [] });
  t.match(await entriesFor("email", email.toLowerCase()), [
    { reason: "spam_complaint", client_id: "", source: { event: "spamreport", notification_id: id } },
  ]);
  t.match(await entriesFor("email", other.toLowerCase()), [{ reason: "hard_bounce" }]);
  // A spam report settles nothing about the message: the channel stays delivered.
  t.equal((await channelRow(sql, id, "email"))?.status, "delivered");
  const before = await entryCount();
  const retried = await postEvents(events);
  t.match(retried.answer, { stored: 0, duplicates: 5, suppressed: 0 }, "SendGrid's retry adds nothing");
  t.equal(await entryCount(), before);
});

t.test("an asynchronous bounce (no sg_message_id) is not a receipt, and still suppresses", async (t) => {
  const email = newEmail();
  const before = Number((await sql`select count(*)::int as n from provider_receipts`)[0]?.n);
  const { status, answer } = await postEvents([
    { email, timestamp: 1_700_000_000, event: "bounce", type: "bounce", reason: "550 gone", sg_event_id: newId() },
  ]);
  t.equal(status, 200);
  t.match(answer, { events: 1, accepted: 1, stored: 0, suppressed: 1, rejected: [] });
  t.equal(Number((await sql`select count(*)::int as n from provider_receipts`)[0]?.n), before);
  t.match(await entriesFor("email", email.toLowerCase()), [{ reason: "hard_bounce" }]);
});

const inboundUrl = `${receipts.url}/webhooks/plivo/inbound`;

/** An inbound message signed by hand (V3 over URL, sorted params and nonce). */
const postInbound = (
  params: Record<string, string>,
  options: { token?: string; signature?: string | null; url?: string } = {},
) => {
  const url = options.url ?? inboundUrl;
  const nonce = newId();
  const sorted = Object.keys(params)
    .sort()
    .map((k) => k + params[k])
    .join("");
  const signature = createHmac("sha256", options.token ?? PLIVO_TOKEN)
    .update(`${url}?${sorted}.${nonce}`)
    .digest("base64");
  const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded" };
  if (options.signature !== null) {
    headers["x-plivo-signature-v3"] = options.signature ?? signature;
    headers["x-plivo-signature-v3-nonce"] = nonce;
  }
  return fetch(url, { method: "POST", headers, body: new URLSearchParams(params) });
};

t.test("STOP then START through the Plivo sandbox, with the configured replies", async (t) => {
  const from = newNumber();
  const stop = await plivo.inbound({ from: `+${from}`, to: "+14155550100", text: "  stop \n" });
  t.equal(stop?.status, 200);
  t.match(stop?.content_type, /^application\/xml/);
  t.equal(
    stop?.body,
    '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Message src="14155550100" dst="' +
      from +
      '">You are unsubscribed &amp; will get no more messages. Reply START to &lt;resubscribe&gt;.</Message></Response>',
  );
  t.same(await entriesFor("sms", `+${from}`), [
    {
      channel: "sms",
      address: `+${from}`,
      client_id: "",
      reason: "carrier_opt_out",
      source: { provider: "plivo", event: "stop", event_id: stop?.message_uuid },
    },
  ]);
  t.equal((await metric('provider="plivo",reason="carrier_opt_out"')) >= 1, true);

  const start = await plivo.inbound({ from: `+${from}`, to: "+14155550100", text: "Start" });
  t.equal(start?.status, 200);
  t.match(start?.body, />You are subscribed again\.<\/Message>/);
  t.same(await entriesFor("sms", `+${from}`), [], "START lifts the opt-out");
});

t.test("START does not lift a hard bounce or a client's own entry", async (t) => {
  const from = newNumber();
  await sql`insert into suppressions (channel, address, client_id, reason, source)
    values ('sms', ${`+${from}`}, '', 'hard_bounce', '{"provider":"plivo"}'),
           ('sms', ${`+${from}`}, 'shop', 'manual', '{}')`;
  const res = await postInbound({ From: from, To: "14155550100", Text: "UNSTOP", MessageUUID: randomUUID() });
  t.equal(res.status, 200);
  t.match(await entriesFor("sms", `+${from}`), [
    { client_id: "", reason: "hard_bounce" },
    { client_id: "shop", reason: "manual" },
  ]);
  // STOP on a number already bounced keeps the first entry.
  t.equal((await postInbound({ From: from, To: "14155550100", Text: "QUIT", MessageUUID: randomUUID() })).status, 200);
  t.match(await entriesFor("sms", `+${from}`), [{ client_id: "", reason: "hard_bounce" }, { client_id: "shop" }]);
});

t.test("other texts change nothing and are answered with an empty Response", async (t) => {
  const before = await entryCount();
  for (const text of ["stop please", "STOP!", "ſtop", "", "hello", "S T O P"]) {
    const res = await postInbound({ From: newNumber(), To: "14155550100", Text: text, MessageUUID: randomUUID() });
    t.equal(res.status, 200, JSON.stringify(text));
    t.equal(await res.text(), '<?xml version="1.0" encoding="UTF-8"?>\n<Response/>');
  }
  t.equal(await entryCount(), before);
});

t.test("without configured replies, a STOP is answered with an empty Response", async (t) => {
  const app = createApp({
    database: receipts.database,
    bus: receipts.bus,
    log: receipts.log,
    isStopping: () => false,
    plivoAuthToken: PLIVO_TOKEN,
  });
  const url = "http://receipts.test/webhooks/plivo/inbound";
  const from = newNumber();
  const params = { From: from, To: "14155550100", Text: "CANCEL", MessageUUID: randomUUID() };
  const nonce = newId();
  const sorted = Object.keys(params)
    .sort()
    .map((k) => k + params[k as keyof typeof params])
    .join("");
  const res = await app.request(url, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      "x-plivo-signature-v3": createHmac("sha256", PLIVO_TOKEN).update(`${url}?${sorted}.${nonce}`).digest("base64"),
      "x-plivo-signature-v3-nonce": nonce,
    },
    body: new URLSearchParams(params),
  });
  t.equal(res.status, 200);
  t.equal(await res.text(), '<?xml version="1.0" encoding="UTF-8"?>\n<Response/>');
  t.match(await entriesFor("sms", `+${from}`), [{ reason: "carrier_opt_out" }]);
});

t.test("a missing or wrong signature on the inbound route is a 401 problem and adds nothing", async (t) => {
  const before = await entryCount();
  const params = { From: newNumber(), To: "14155550100", Text: "STOP", MessageUUID: randomUUID() };
  for (const options of [{ signature: null }, { token: "another-token" }, { signature: "AAAA" }]) {
    const res = await postInbound(params, options);
    t.equal(res.status, 401, JSON.stringify(options));
    t.equal(res.headers.get("content-type"), "application/problem+json");
  }
  // V2 alone, correctly signed, is refused too: it covers no parameter.
  const nonce = "12345";
  const res = await fetch(inboundUrl, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      "x-plivo-signature-v2": createHmac("sha256", PLIVO_TOKEN)
        .update(inboundUrl + nonce)
        .digest("base64"),
      "x-plivo-signature-v2-nonce": nonce,
    },
    body: new URLSearchParams(params),
  });
  t.equal(res.status, 401);
  t.equal(await entryCount(), before);
});

t.test("a signed inbound message without From is a 400 problem and adds nothing", async (t) => {
  const before = await entryCount();
  const res = await postInbound({ To: "14155550100", Text: "STOP", MessageUUID: randomUUID() });
  t.equal(res.status, 400);
  t.match(await res.json(), { code: "validation_failed", errors: [{ field: "From" }] });
  t.equal(await entryCount(), before);
});

/** A delivery report signed by hand. */
const postReport = (params: Record<string, string>) => postInbound(params, { url: `${receipts.url}/webhooks/plivo` });

t.test("Plivo reports: a number that cannot receive is suppressed, a temporary failure is not", async (t) => {
  const cases = [
    ["undelivered", "50", "hard_bounce"],
    ["failed", "70", "hard_bounce"],
    ["undelivered", "200", "carrier_opt_out"],
    ["undelivered", "80", null],
    ["undelivered", "20", null],
    ["failed", "30", null],
    ["delivered", "50", null],
  ] as const;
  for (const [status, code, reason] of cases) {
    const to = newNumber();
    const uuid = randomUUID();
    const res = await postReport({ MessageUUID: uuid, Status: status, ErrorCode: code, To: to, From: "14155550100" });
    t.equal(res.status, 200);
    const entries = await entriesFor("sms", `+${to}`);
    if (reason === null) t.same(entries, [], `${status} ${code}`);
    else {
      t.same(
        entries.map((e) => [e.client_id, e.reason, e.source]),
        [["", reason, { provider: "plivo", event: `${status}:${code}`, event_id: `${uuid}:${status}` }]],
        `${status} ${code}`,
      );
    }
  }
});

t.test("keywords: only the whole trimmed text, ASCII letters in any case", async (t) => {
  t.same(keywordOf(" StopAll\t"), { kind: "opt_out", keyword: "STOPALL" });
  t.same(keywordOf("optin"), { kind: "opt_in", keyword: "OPTIN" });
  t.equal(keywordOf("ſtop"), null);
  t.equal(keywordOf("stop it"), null);
  const words = fc.constantFrom(
    "STOP",
    "STOPALL",
    "UNSUBSCRIBE",
    "CANCEL",
    "END",
    "QUIT",
    "OPTOUT",
    "REVOKE",
    "START",
    "UNSTOP",
    "YES",
    "OPTIN",
  );
  const caseMix = (word: string, flips: boolean[]) =>
    [...word].map((ch, i) => (flips[i % flips.length] ? ch.toLowerCase() : ch)).join("");
  fc.assert(
    fc.property(words, fc.array(fc.boolean(), { minLength: 1 }), fc.constantFrom("", " ", "\n", "\t "), (w, f, pad) => {
      const asked = keywordOf(`${pad}${caseMix(w, f)}${pad}`);
      return (
        asked?.keyword === w && asked.kind === (["START", "UNSTOP", "YES", "OPTIN"].includes(w) ? "opt_in" : "opt_out")
      );
    }),
  );
  // Anything else (a keyword inside other text, or with other characters) is no keyword.
  fc.assert(
    fc.property(words, fc.string({ minLength: 1, maxLength: 5 }), (w, extra) => {
      const text = `${w}${extra}`;
      return /^[A-Za-z]*\s*$/.test(extra) || keywordOf(text) === null;
    }),
  );
});

t.test("replies are well-formed XML whatever they hold", async (t) => {
  t.equal(xmlEscape(`<a href="x">&'`), "&lt;a href=&quot;x&quot;&gt;&amp;&apos;");
  t.equal(xmlEscape("a\u0000b\u0007c\ud800d\ufffee\n💥"), "abcde\n💥", "what XML cannot hold is dropped");
  t.notOk(xmlCharacter("\u0001"));
  fc.assert(
    fc.property(fc.string({ unit: "binary" }), fc.string(), (text, number) => {
      const xml = plivoReply({ src: number, dst: number, text });
      const body = xml.slice(xml.indexOf("<Response>"));
      // No markup but ours, no character XML refuses.
      return (
        (body.match(/</g) ?? []).length === 4 &&
        [...body].every(xmlCharacter) &&
        !/&(?!(amp|lt|gt|quot|apos);)/.test(body)
      );
    }),
  );
});
