import { generateKeyPairSync, sign } from "node:crypto";
import { MetricsRegistry } from "@notify/http";
import fc from "fast-check";
import t from "tap";
import { channelRow, newId, seedChannel, startReceipts } from "./support.js";

// A batch with a bad event in it: the good ones are applied and the post answered 200 (SendGrid
// retries a non-2xx post whole for 24 h), the bad ones reported by index; never a 5xx.

const keys = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const metrics = new MetricsRegistry();
const receipts = await startReceipts(t, {
  sendgridPublicKey: keys.publicKey.export({ format: "der", type: "spki" }).toString("base64"),
  metrics,
});
const { sql } = receipts;

/** Posts raw bytes over HTTP, signed over the current timestamp and exactly those bytes. */
const post = (body: Uint8Array | string) => {
  const bytes = typeof body === "string" ? Buffer.from(body, "utf8") : Buffer.from(body);
  const timestamp = String(Math.floor(Date.now() / 1000));
  return fetch(`${receipts.url}/webhooks/sendgrid`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-twilio-email-event-webhook-signature": sign(
        "sha256",
        Buffer.concat([Buffer.from(timestamp), bytes]),
        keys.privateKey,
      ).toString("base64"),
      "x-twilio-email-event-webhook-timestamp": timestamp,
    },
    body: bytes,
  });
};

interface Answer {
  events: number;
  accepted: number;
  stored: number;
  rejected: Array<{ index: number; reason: string; detail: string }>;
  repaired: Array<{ index: number; reason: string; fields: string[] }>;
}

const bounce = (messageId: string, fields: Record<string, unknown> = {}) => ({
  email: "ada@example.com",
  timestamp: 1_700_000_000,
  event: "bounce",
  type: "bounce",
  status: "5.1.1",
  reason: "550 no such user",
  sg_event_id: newId(),
  sg_message_id: `${messageId}.filterdrecv-1-2-3.0`,
  ...fields,
});

/** A delivered email channel whose send is recorded with this message id. */
const deliveredChannel = async () => {
  const messageId = newId();
  const id = await seedChannel(sql, {
    channel: "email",
    status: "delivered",
    provider: "sendgrid",
    providerId: messageId,
  });
  return { id, messageId };
};

const metric = async (name: string, labels: string) => {
  const line = (await metrics.render()).split("\n").find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? 0 : Number(line.split(" ").at(-1));
};

t.test(
  "a NUL-byte event, a mistyped one and a non-object are reported; the bounce in the batch is applied",
  async (t) => {
    const good = await deliveredChannel();
    const repaired = await deliveredChannel();
    const body = JSON.stringify([
      bounce(newId(), { sg_event_id: "evt\u0000nul" }),
      bounce(good.messageId),
      bounce(newId(), { sg_message_id: 42 }),
      "not an event",
      // A bounce whose SMTP reason holds U+0000 and an unpaired surrogate, with a field SendGrid
      // never documented: stored repaired, never lost.
      bounce(repaired.messageId, { reason: "550 bad\u0000user \ud800", x_new_field: { a: 1 } }),
      { event: "delivered" },
    ]);
    t.ok(body.includes("\\u0000"), "the NUL travels as JSON's escape, as SendGrid would send it");
    const rejectedBefore = await metric("notify_receipts_rejected_total", 'provider="sendgrid",reason="invalid_event"');
    const res = await post(body);
    t.equal(res.status, 200);
    const answer = (await res.json()) as Answer;
    t.match(answer, { events: 6, accepted: 2, stored: 2 });
    t.same(
      answer.rejected.map((r) => [r.index, r.reason]),
      [
        [0, "invalid_event"],
        [2, "invalid_event"],
        [3, "not_an_object"],
        [5, "invalid_event"],
      ],
    );
    t.match(answer.rejected[0]?.detail, /sg_event_id: must not contain U\+0000/);
    t.match(answer.rejected[1]?.detail, /sg_message_id: must be a string/);
    t.same(
      answer.repaired.map((r) => [r.index, r.reason, r.fields]),
      [
        [4, "unknown_fields", ["x_new_field"]],
        [4, "unstorable_text", ["reason"]],
      ],
    );
    t.match(await channelRow(sql, good.id, "email"), {
      status: "bounced",
      reason: "hard bounce: 5.1.1 550 no such user",
    });
    t.match(await channelRow(sql, repaired.id, "email"), {
      status: "bounced",
      reason: "hard bounce: 5.1.1 550 bad\ufffduser \ufffd",
    });
    const [stored] = await sql<{ payload: Record<string, unknown> }[]>`
    select payload from provider_receipts where provider_id = ${repaired.messageId}`;
    t.notOk(stored && "x_new_field" in stored.payload, "unknown fields are not stored");
    t.equal(
      await metric("notify_receipts_rejected_total", 'provider="sendgrid",reason="invalid_event"'),
      rejectedBefore + 3,
    );
    t.ok((await metric("notify_receipts_repaired_total", 'provider="sendgrid",reason="unstorable_text"')) >= 1);
    t.equal((await post(body)).status, 200, "SendGrid's retry of the same post changes nothing");
  },
);

t.test("invalid UTF-8: broken text is stored as U+FFFD, a broken id is rejected", async (t) => {
  const broken = await deliveredChannel();
  const good = await deliveredChannel();
  const json = (value: unknown) => Buffer.from(JSON.stringify(value));
  // 0xff never occurs in UTF-8; 0xc3 opens a two-byte sequence that the quote then breaks.
  const { reason: _, ...withoutReason } = bounce(broken.messageId);
  const reasonWithBrokenByte = Buffer.concat([
    json({ ...withoutReason, reason: "550 mailbox" }).subarray(0, -2),
    Buffer.from([0xff, 0xc3]),
    Buffer.from('"}'),
  ]);
  const brokenId = Buffer.from(`{"event":"bounce","sg_event_id":"a\xff","sg_message_id":"${newId()}.x"}`, "latin1");
  const body = Buffer.concat([
    Buffer.from("[ "),
    reasonWithBrokenByte,
    Buffer.from(",\n"),
    brokenId,
    Buffer.from(", "),
    json(bounce(good.messageId)),
    Buffer.from("]"),
  ]);
  const res = await post(body);
  t.equal(res.status, 200);
  const answer = (await res.json()) as Answer;
  t.same(
    answer.rejected.map((r) => [r.index, r.reason]),
    [[1, "invalid_utf8"]],
  );
  t.same(
    answer.repaired.map((r) => [r.index, r.reason, r.fields]),
    [[0, "invalid_utf8", ["reason"]]],
  );
  t.match(await channelRow(sql, broken.id, "email"), {
    status: "bounced",
    reason: /^hard bounce: 5\.1\.1 550 mailbox\ufffd/,
  });
  t.match(await channelRow(sql, good.id, "email"), { status: "bounced" });
});

t.test("ids Postgres could not index, deep nesting: rejected per event", async (t) => {
  const good = await deliveredChannel();
  let deep: unknown = "bottom";
  for (let i = 0; i < 40; i++) deep = [deep];
  const res = await post(
    JSON.stringify([
      bounce(newId(), { sg_event_id: "x".repeat(5000) }),
      bounce(newId(), { pool: deep }),
      bounce(good.messageId, { category: ["a", { b: [1, 2] }] }),
    ]),
  );
  t.equal(res.status, 200);
  const answer = (await res.json()) as Answer;
  t.same(
    answer.rejected.map((r) => [r.index, r.reason]),
    [
      [0, "invalid_event"],
      [1, "invalid_event"],
    ],
  );
  t.match(await channelRow(sql, good.id, "email"), { status: "bounced" });
});

t.test("a body that is not a JSON array is refused whole, as a problem", async (t) => {
  for (const body of ['{"event":"bounce"}', "[1,", "", '"events"', "\ufeff[]"]) {
    const res = await post(body);
    t.equal(res.status, 400, JSON.stringify(body));
    t.equal(res.headers.get("content-type"), "application/problem+json");
  }
  const empty = await post("[]");
  t.equal(empty.status, 200);
  t.match(await empty.json(), { events: 0, accepted: 0, rejected: [], repaired: [] });
});

t.test("fuzz: random batches, validly signed, are never a 5xx and every good bounce is applied", async (t) => {
  const nasty = fc.string({
    unit: fc.oneof(
      { weight: 1, arbitrary: fc.constantFrom("\u0000", "\ud800", "\udc00", '"', "\\") },
      { weight: 6, arbitrary: fc.string({ unit: "binary", minLength: 1, maxLength: 1 }) },
    ),
    maxLength: 30,
  });
  const scalar = fc.oneof(nasty, fc.integer(), fc.double(), fc.boolean(), fc.constant(null));
  const junkValue = fc.oneof(scalar, fc.jsonValue({ maxDepth: 4 }), fc.array(scalar, { maxLength: 3 }));
  /** Anything SendGrid would never send, as bytes: raw JSON or JSON with broken UTF-8 inside a string. */
  const junk = fc.oneof(
    fc.jsonValue({ maxDepth: 3 }).map((value) => Buffer.from(JSON.stringify(value))),
    fc
      .record(
        {
          event: junkValue,
          sg_event_id: junkValue,
          sg_message_id: junkValue,
          type: junkValue,
          reason: junkValue,
          timestamp: junkValue,
          pool: junkValue,
        },
        { requiredKeys: [] },
      )
      .map((value) => Buffer.from(JSON.stringify(value))),
    fc
      .tuple(
        nasty,
        fc.uint8Array({ minLength: 1, maxLength: 6 }).map((bytes) => bytes.map((b) => b | 0x80)),
      )
      .map(([text, bytes]) =>
        Buffer.concat([
          Buffer.from(`{"event":"bounce","sg_event_id":${JSON.stringify(text)},"sg_message_id":"`),
          Buffer.from(bytes),
          Buffer.from('"}'),
        ]),
      ),
  );
  /** A bounce for a real channel, with random text where SendGrid carries text and unknown fields. */
  const goodExtras = fc.record({
    reason: nasty,
    status: nasty,
    category: fc.array(nasty, { maxLength: 3 }),
    extra: fc.dictionary(
      nasty.map((k) => `x_${k}`),
      fc.jsonValue({ maxDepth: 3 }),
      { maxKeys: 3 },
    ),
  });
  const batch = fc.array(
    fc.oneof(
      junk.map((bytes) => ({ bytes })),
      goodExtras.map((extras) => ({ extras })),
    ),
    {
      minLength: 1,
      maxLength: 8,
    },
  );
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(batch, async (items) => {
      runs++;
      const channels = new Map<number, string>();
      const parts: Buffer[] = [];
      for (const [index, item] of items.entries()) {
        if ("bytes" in item) {
          parts.push(item.bytes);
          continue;
        }
        const { id, messageId } = await deliveredChannel();
        channels.set(index, id);
        const { extra, ...fields } = item.extras;
        parts.push(Buffer.from(JSON.stringify({ ...extra, ...bounce(messageId, fields) })));
      }
      const body = Buffer.concat([
        Buffer.from("["),
        ...parts.flatMap((p, i) => (i ? [Buffer.from(","), p] : [p])),
        Buffer.from("]"),
      ]);
      const res = await post(body);
      if (res.status !== 200) {
        t.fail(`answered ${res.status}: ${await res.text()}`);
        return false;
      }
      const answer = (await res.json()) as Answer;
      if (answer.events !== items.length) return false;
      for (const [index, id] of channels) {
        if (answer.rejected.some((r) => r.index === index)) return false;
        if ((await channelRow(sql, id, "email"))?.status !== "bounced") return false;
      }
      return true;
    }),
    { numRuns: 150 },
  );
  t.equal(runs, 150);
});
