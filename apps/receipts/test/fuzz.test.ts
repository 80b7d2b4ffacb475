import { createHmac, generateKeyPairSync, sign } from "node:crypto";
import { captureLogger, freshBus, freshDatabase } from "@notify/testing";
import fc from "fast-check";
import t from "tap";
import { createApp } from "../src/app.js";

// Fuzz over the receipts webhooks, the other public surface: generated SendGrid batches and
// Plivo reports, validly signed or not, with stale, future or garbage timestamps, NUL bytes,
// invalid UTF-8, wrong media types and random paths. Whatever arrives: never a 5xx, every
// refusal problem+json. FUZZ_RUNS sets the number of requests (npm run fuzz: 100 000).
const RUNS = Number(process.env.FUZZ_RUNS ?? 1500);
const PUBLIC = "https://receipts.example";
const PLIVO_TOKEN = "plivo-fuzz-token";
const keys = generateKeyPairSync("ec", { namedCurve: "prime256v1" });

const { database } = await freshDatabase(t);
const bus = await freshBus(t);
const { log } = captureLogger("receipts");
const app = createApp({
  database,
  bus,
  log,
  isStopping: () => false,
  publicBaseUrl: PUBLIC,
  plivoAuthToken: PLIVO_TOKEN,
  sendgridPublicKey: keys.publicKey.export({ format: "der", type: "spki" }).toString("base64"),
});

const text = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.constantFrom("\u0000", "\uD800", "délivré", "💥", "bounce", "delivered", "dropped", ""),
);
const value = fc.oneof(text, fc.integer(), fc.double(), fc.boolean(), fc.constant(null));
const event = fc.dictionary(
  fc.oneof(
    fc.constantFrom(
      "email",
      "event",
      "sg_event_id",
      "sg_message_id",
      "timestamp",
      "reason",
      "type",
      "notification_id",
      "channel",
      "__proto__",
    ),
    fc.string({ maxLength: 8 }),
  ),
  fc.oneof(value, fc.array(value, { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 5 }), value)),
  { maxKeys: 8 },
);
const sendgridBody = fc.oneof(
  fc.array(fc.oneof(event, value), { maxLength: 6 }).map((events) => Buffer.from(JSON.stringify(events))),
  fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes)),
  fc.constantFrom("", "[", "{}", "null", "[null]", '[{"sg_event_id":"\\u0000"}]').map((s) => Buffer.from(s)),
);
const plivoParams = fc.dictionary(
  fc.oneof(fc.constantFrom("MessageUUID", "Status", "ErrorCode", "To", "From", "notification_id", "channel"), text),
  text,
  { maxKeys: 7 },
);
const timestamp = fc.oneof(
  fc.constant("now"),
  fc.constantFrom("0", "-5", "1.5", "abc", "99999999999", ""),
  fc.integer({ min: -100_000, max: 100_000 }).map((offset) => String(Math.floor(Date.now() / 1000) + offset)),
);
const request = fc.record({
  target: fc.constantFrom("sendgrid", "plivo", "other"),
  signed: fc.boolean(),
  timestamp,
  sendgridBody,
  plivoParams,
  query: fc.dictionary(fc.constantFrom("notification_id", "channel", "sig", "x"), text, { maxKeys: 3 }),
  contentType: fc.constantFrom(
    "application/json",
    "application/x-www-form-urlencoded",
    "text/plain",
    "multipart/form-data",
    "",
  ),
});

const WELL_FORMED = {
  target: "sendgrid" as "sendgrid" | "plivo" | "other",
  signed: true,
  timestamp: "now",
  sendgridBody: Buffer.from(JSON.stringify([{ event: "delivered", sg_event_id: "e-1", sg_message_id: "m-1.x" }])),
  plivoParams: { MessageUUID: "0b7f7c56-0000-4000-8000-000000000001", Status: "delivered" } as Record<string, string>,
  query: {} as Record<string, string>,
  contentType: "application/json" as
    | "application/json"
    | "application/x-www-form-urlencoded"
    | "text/plain"
    | "multipart/form-data"
    | "",
};

t.test(`${RUNS} generated webhook posts: no 5xx, every refusal problem+json`, async (t) => {
  const failures: string[] = [];
  const statuses = new Map<number, number>();
  const taken = new Set<string>();
  await fc
    .assert(
      fc.asyncProperty(request, async (r) => {
        const query = new URLSearchParams(r.query).toString();
        const path = r.target === "other" ? "/webhooks/unknown" : `/webhooks/${r.target}`;
        const url = `${path}${query ? `?${query}` : ""}`;
        const headers: Record<string, string> = {};
        if (r.contentType) headers["content-type"] = r.contentType;
        let body: Buffer | string;
        if (r.target === "plivo") {
          body = new URLSearchParams(r.plivoParams).toString();
          if (r.signed) {
            const nonce = "n0nce";
            const sorted = Object.keys(r.plivoParams)
              .sort()
              .map((k) => k + r.plivoParams[k])
              .join("");
            headers["x-plivo-signature-v3"] = createHmac("sha256", PLIVO_TOKEN)
              .update(`${PUBLIC}${url}?${sorted}.${nonce}`)
              .digest("base64");
            headers["x-plivo-signature-v3-nonce"] = nonce;
          }
        } else {
          body = r.sendgridBody;
          const ts = r.timestamp === "now" ? String(Math.floor(Date.now() / 1000)) : r.timestamp;
          headers["x-twilio-email-event-webhook-timestamp"] = ts;
          if (r.signed) {
            headers["x-twilio-email-event-webhook-signature"] = sign(
              "sha256",
              Buffer.concat([Buffer.from(ts), r.sendgridBody]),
              keys.privateKey,
            ).toString("base64");
          }
        }
        const response = await app.request(url, { method: "POST", headers, body });
        const type = response.headers.get("content-type") ?? "";
        const answer = await response.text();
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        if (response.status === 200) taken.add(r.target);
        const what = `POST ${url} (${r.target}, signed ${r.signed}, ${JSON.stringify(r.target === "plivo" ? r.plivoParams : r.sendgridBody.toString("latin1"))}) -> ${response.status} ${answer.slice(0, 120)}`;
        if (response.status >= 500) failures.push(what);
        if (response.status >= 400 && !type.startsWith("application/problem+json"))
          failures.push(`not problem+json: ${what}`);
        return failures.length === 0;
      }),
      {
        numRuns: RUNS,
        seed: process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined,
        // Well-formed signed posts to both webhooks always run, besides the generated ones.
        examples: [
          [{ ...WELL_FORMED, target: "plivo" as const, contentType: "application/x-www-form-urlencoded" as const }],
          [{ ...WELL_FORMED, target: "sendgrid" as const }],
        ],
      },
    )
    .catch((error: Error) => failures.push(error.message.slice(0, 2000)));
  t.same(failures, [], "no 5xx, every refusal problem+json");
  t.same(
    [...taken].sort(),
    ["plivo", "sendgrid"],
    `signed posts to both were taken (answers: ${JSON.stringify([...statuses])})`,
  );
  t.ok(
    [...statuses.keys()].some((s) => s >= 400 && s < 500),
    "and bad ones refused",
  );
});
