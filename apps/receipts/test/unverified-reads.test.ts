import { generateKeyPairSync, randomUUID, sign } from "node:crypto";
import { type ClientRequest, type IncomingHttpHeaders, request } from "node:http";
import { createAttemptThrottle, listen } from "@notify/http";
import { captureLogger, freshBus, freshDatabase } from "@notify/testing";
import t from "tap";
import { createApp, type ReceiptsDeps } from "../src/app.js";

// A webhook must read its body to check the signature over it. Those reads are what an
// unauthenticated client can make this process hold: each provider's body limit is sized from
// its real posts and judged from Content-Length before anything is read, and the reads in
// progress are bounded (503 beyond, and 429 beyond the few reads allowed to addresses out of
// attempts), decided before the body is read. Every assertion is on answers and their counts:
// a refused post is answered while its body is still unsent.

const PLIVO_TOKEN = "plivo-reads-token";
const keys = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const stranger = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const { database } = await freshDatabase(t);
const bus = await freshBus(t);

// Posts still open when a test ends (one that failed) are cut, so the servers can close.
const open = new Set<ClientRequest>();
t.afterEach(() => {
  for (const req of open) req.destroy();
  open.clear();
});

/** The receipts app over real HTTP (the budget is per socket address: 127.0.0.1 here). */
async function serve(options: Pick<ReceiptsDeps, "preauthThrottle" | "unverifiedReads">) {
  const app = createApp({
    database,
    bus,
    log: captureLogger("receipts").log,
    isStopping: () => false,
    plivoAuthToken: PLIVO_TOKEN,
    sendgridPublicKey: keys.publicKey.export({ format: "der", type: "spki" }).toString("base64"),
    ...options,
  });
  const server = await listen(app, 0, "127.0.0.1");
  t.teardown(() => server.close());
  return server.port;
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * A POST whose head and the first `sent` bytes of its body go out now, and the rest on
 * `finish()`; Content-Length is declared unless `chunked`. `answered` says whether the server has
 * answered yet: it cannot answer a post it admitted before the whole body is in.
 */
function post(
  port: number,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
  options: { sent?: number; chunked?: boolean; declaredLength?: number } = {},
) {
  const sent = options.sent ?? body.length;
  const req = request({
    host: "127.0.0.1",
    port,
    path,
    method: "POST",
    agent: false,
    headers: options.chunked
      ? headers
      : { ...headers, "content-length": String(options.declaredLength ?? body.length) },
  });
  open.add(req);
  req.on("close", () => open.delete(req));
  // A refused post's connection is closed by the server while the client may still be sending.
  req.on("error", () => {});
  const state = { answered: false };
  const answer = new Promise<Answer>((resolve) => {
    req.on("response", (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => {
        text += chunk;
      });
      res.on("end", () => {
        state.answered = true;
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text });
      });
    });
  });
  if (sent > 0) req.write(body.subarray(0, sent));
  else req.flushHeaders();
  return {
    answer,
    answered: () => state.answered,
    finish: () => req.end(body.subarray(sent)),
  };
}

/** The answer, or a failed test (not a hung one) when none comes within `ms`. */
const within = <T>(promise: Promise<T>, ms: number, what: string): Promise<T> =>
  Promise.race([
    promise,
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms: ${what}`)), ms)),
  ]);
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const event = () => ({
  email: "ada@example.com",
  timestamp: 1_700_000_000,
  event: "delivered",
  sg_event_id: randomUUID(),
  sg_message_id: `${randomUUID()}.filterdrecv-1`,
});

/** A SendGrid post of `body` (by default one event), signed now with `key`. */
function sendgrid(body: Buffer = Buffer.from(JSON.stringify([event()])), key = keys.privateKey) {
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = sign("sha256", Buffer.concat([Buffer.from(timestamp), body]), key).toString("base64");
  return {
    body,
    headers: {
      "content-type": "application/json",
      "x-twilio-email-event-webhook-signature": signature,
      "x-twilio-email-event-webhook-timestamp": timestamp,
    },
  };
}

/** A batch of exactly `bytes` bytes: one event, padded with JSON whitespace. */
const batchOf = (bytes: number) => {
  const json = JSON.stringify([event()]);
  return Buffer.from(`${json.slice(0, -1)}${" ".repeat(bytes - json.length)}]`);
};

const MIB = 1_048_576;

t.test("body limits: SendGrid 1 MiB, Plivo 16 KiB, refused from Content-Length before any byte is read", async (t) => {
  const port = await serve({ preauthThrottle: createAttemptThrottle({ perSecond: 1000, burst: 1000 }) });

  // SendGrid posts a batch once it reaches 768 KB: a signed batch at the limit is processed.
  const full = sendgrid(batchOf(MIB));
  const atLimit = await within(post(port, "/webhooks/sendgrid", full.headers, full.body).answer, 10_000, "1 MiB batch");
  t.equal(atLimit.status, 200, "a 1 MiB signed batch is processed");

  const over = sendgrid(batchOf(MIB + 1));
  const declared = post(port, "/webhooks/sendgrid", over.headers, over.body, { sent: 0 });
  const refused = await within(declared.answer, 5000, "SendGrid post over the limit, body unsent");
  t.equal(refused.status, 413, "answered 413 while none of its body was sent");
  t.match(JSON.parse(refused.body), { code: "payload_too_large" });

  const plivoHeaders = {
    "content-type": "application/x-www-form-urlencoded",
    "x-plivo-signature-v3": "AAAA",
    "x-plivo-signature-v3-nonce": "n",
  };
  const report = post(port, "/webhooks/plivo", plivoHeaders, Buffer.alloc(16_385, "a"), { sent: 0 });
  t.equal((await within(report.answer, 5000, "Plivo report over the limit, body unsent")).status, 413);

  // Without a declared length the body is counted as it arrives: refused once past the limit,
  // while the client is still sending.
  const streamed = sendgrid(Buffer.alloc(MIB + 64 * 1024, " "));
  const chunked = post(port, "/webhooks/sendgrid", streamed.headers, streamed.body, { chunked: true, sent: MIB + 1 });
  t.equal((await within(chunked.answer, 5000, "chunked post past the limit, unfinished")).status, 413);
  chunked.finish();
});

t.test("at most maxReads bodies are read at once; the next post gets 503 with Retry-After, unread", async (t) => {
  const port = await serve({
    preauthThrottle: createAttemptThrottle({ perSecond: 1000, burst: 1000 }),
    unverifiedReads: { maxReads: 4, maxOverBudgetReads: 2 },
  });
  // Six posts open at once, each with half of its body sent: four are admitted and wait for the
  // rest of their bodies; two are refused at once.
  const signed = [sendgrid(), sendgrid(undefined, stranger.privateKey)];
  const posts = Array.from({ length: 6 }, (_, i) => {
    const { headers, body } = signed[i % 2] ?? sendgrid();
    return { valid: i % 2 === 0, ...post(port, "/webhooks/sendgrid", headers, body, { sent: 10 }) };
  });
  const answeredEarly = async () => {
    for (let i = 0; i < 100 && posts.filter((p) => p.answered()).length < 2; i++) await pause(20);
    return posts.filter((p) => p.answered());
  };
  const early = await answeredEarly();
  t.equal(early.length, 2, "two posts are answered before their bodies are sent");
  for (const p of early) {
    const answer = await p.answer;
    t.equal(answer.status, 503);
    t.equal(answer.headers["retry-after"], "1");
    t.match(JSON.parse(answer.body), { code: "dependency_unavailable" });
  }
  await pause(200);
  const admitted = posts.filter((p) => !p.answered());
  t.equal(admitted.length, 4, "the four admitted posts are still being read");

  for (const p of admitted) p.finish();
  const answers = await within(Promise.all(admitted.map((p) => p.answer)), 5000, "admitted posts");
  t.same(
    answers.map((a) => a.status).sort(),
    admitted.map((p) => (p.valid ? 200 : 401)).sort(),
    "each admitted post is verified: SendGrid's processed, the stranger's refused",
  );

  // The reads were given back: a new post is admitted and read.
  const next = sendgrid();
  t.equal((await within(post(port, "/webhooks/sendgrid", next.headers, next.body).answer, 5000, "next")).status, 200);
});

t.test("an address out of attempts is read only through the over-budget reads; 429 beyond them", async (t) => {
  const port = await serve({
    preauthThrottle: createAttemptThrottle({ perSecond: 0.001, burst: 2 }),
    unverifiedReads: { maxReads: 8, maxOverBudgetReads: 2 },
  });
  // Spend the address's budget.
  for (let i = 0; i < 2; i++) {
    const bad = sendgrid(undefined, stranger.privateKey);
    t.equal((await post(port, "/webhooks/sendgrid", bad.headers, bad.body).answer).status, 401);
  }

  // Two posts hold both over-budget reads (one of them SendGrid's own), a third is refused.
  const genuine = sendgrid();
  const bad = sendgrid(undefined, stranger.privateKey);
  const held = [
    post(port, "/webhooks/sendgrid", genuine.headers, genuine.body, { sent: 10 }),
    post(port, "/webhooks/sendgrid", bad.headers, bad.body, { sent: 10 }),
  ];
  await pause(100);
  const third = sendgrid();
  const limited = await within(
    post(port, "/webhooks/sendgrid", third.headers, third.body, { sent: 0 }).answer,
    5000,
    "third post from the address",
  );
  t.equal(limited.status, 429, "refused before its body is sent");
  t.ok(Number(limited.headers["retry-after"]) >= 1, "with Retry-After");
  t.same(
    held.map((p) => p.answered()),
    [false, false],
    "the two admitted posts are still being read",
  );

  for (const p of held) p.finish();
  const [ok, refused] = await within(Promise.all(held.map((p) => p.answer)), 5000, "held posts");
  t.equal(ok?.status, 200, "the verified post is processed normally");
  t.equal(refused?.status, 401);

  // The lane is free again: a genuine post from the address is read, verified and processed.
  const again = sendgrid();
  t.equal((await post(port, "/webhooks/sendgrid", again.headers, again.body).answer).status, 200);
});
