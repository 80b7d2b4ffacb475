import { generateKeyPairSync, randomUUID, sign } from "node:crypto";
import { type ClientRequest, type IncomingHttpHeaders, request } from "node:http";
import { createAttemptThrottle, listen } from "@notify/http";
import { captureLogger, freshBus, freshDatabase } from "@notify/testing";
import t from "tap";
import { createApp, type ReceiptsDeps } from "../src/app.js";

// A webhook must read its body to check the signature over it. Those reads are what an
// unauthenticated client can make this process hold: each provider's body limit is sized from
// its real posts and judged from Content-Length before anything is read, and the reads in
// progress are bounded (429 beyond an address's share, 503 beyond the process's, and 429
// beyond the few reads allowed to addresses out of attempts, one per address), decided before
// the body is read; a body that has not arrived by the read's deadline is answered 408 and its
// read freed. Every assertion is on answers and their counts: a refused post is answered while
// its body is still unsent. Clients post from several loopback addresses (127.0.0.x), each its
// own address for the limits.

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

/** The receipts app over real HTTP (the limits are per socket address), and its log lines. */
async function serve(options: Pick<ReceiptsDeps, "preauthThrottle" | "unverifiedReads"> = {}) {
  const { log, lines } = captureLogger("receipts");
  const app = createApp({
    database,
    bus,
    log,
    isStopping: () => false,
    plivoAuthToken: PLIVO_TOKEN,
    sendgridPublicKey: keys.publicKey.export({ format: "der", type: "spki" }).toString("base64"),
    ...options,
  });
  const server = await listen(app, 0, "127.0.0.1");
  t.teardown(() => server.close());
  return { port: server.port, lines };
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * A POST from `from` (127.0.0.1 unless set) whose head and the first `sent` bytes of its body go
 * out now, and the rest on `finish()`; Content-Length is declared unless `chunked`. `answered`
 * says whether the server has answered yet: it cannot answer a post it admitted before the whole
 * body is in.
 */
function post(
  port: number,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
  options: { sent?: number; chunked?: boolean; declaredLength?: number; from?: string } = {},
) {
  const sent = options.sent ?? body.length;
  const req = request({
    host: "127.0.0.1",
    port,
    path,
    method: "POST",
    agent: false,
    localAddress: options.from ?? "127.0.0.1",
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
  const { port } = await serve({ preauthThrottle: createAttemptThrottle({ perSecond: 1000, burst: 1000 }) });

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

/** Waits until `count` of `posts` are answered (or 2 s pass), and answers those. */
async function answeredEarly<P extends { answered: () => boolean }>(posts: P[], count: number) {
  for (let i = 0; i < 100 && posts.filter((p) => p.answered()).length < count; i++) await pause(20);
  return posts.filter((p) => p.answered());
}

t.test("one address holds at most 4 reads (the default): beyond, 429 unread; others' posts are read", async (t) => {
  // The default limits (32 reads, 4 per address, a burst of 60 attempts): one address opens 40
  // posts and sends part of each body. Without a share per address, 32 of them would hold every
  // read, and SendGrid's own post would get 503.
  const { port } = await serve();
  const signed = [sendgrid(), sendgrid(undefined, stranger.privateKey)];
  const posts = Array.from({ length: 40 }, (_, i) => {
    const { headers, body } = signed[i % 2] ?? sendgrid();
    return { valid: i % 2 === 0, ...post(port, "/webhooks/sendgrid", headers, body, { sent: 10 }) };
  });
  const early = await answeredEarly(posts, 36);
  t.equal(early.length, 36, "36 posts are answered before their bodies are sent");
  const refusals = await Promise.all(early.map((p) => p.answer));
  t.same(
    [...new Set(refusals.map((a) => `${a.status} ${a.headers["retry-after"]} ${JSON.parse(a.body).code}`))],
    ["429 1 rate_limited"],
    "each with 429, Retry-After and rate_limited",
  );
  await pause(200);
  const admitted = posts.filter((p) => !p.answered());
  t.equal(admitted.length, 4, "four posts of the address are being read");

  // SendGrid posts from another address while those four are held: read, verified, processed.
  const genuine = sendgrid();
  const other = await within(
    post(port, "/webhooks/sendgrid", genuine.headers, genuine.body, { from: "127.0.0.2" }).answer,
    5000,
    "SendGrid's post from another address",
  );
  t.equal(other.status, 200, "a signed post from another address is processed");
  t.same(
    admitted.map((p) => p.answered()),
    [false, false, false, false],
    "the four are still being read",
  );

  for (const p of admitted) p.finish();
  const answers = await within(Promise.all(admitted.map((p) => p.answer)), 5000, "admitted posts");
  t.same(
    answers.map((a) => a.status).sort(),
    admitted.map((p) => (p.valid ? 200 : 401)).sort(),
    "each admitted post is verified: SendGrid's processed, the stranger's refused",
  );
});

t.test("at most maxReads bodies are read at once, all addresses together; beyond, 503 unread", async (t) => {
  const { port } = await serve({
    preauthThrottle: createAttemptThrottle({ perSecond: 1000, burst: 1000 }),
    unverifiedReads: { maxReads: 4, maxOverBudgetReads: 2, maxReadsPerAddress: 2 },
  });
  // Six posts open at once, two from each of three addresses (each within its share), each
  // with part of its body sent: four are admitted and wait for the rest; two are refused at once.
  const signed = [sendgrid(), sendgrid(undefined, stranger.privateKey)];
  const posts = Array.from({ length: 6 }, (_, i) => {
    const { headers, body } = signed[i % 2] ?? sendgrid();
    const from = `127.0.0.${2 + Math.floor(i / 2)}`;
    return { valid: i % 2 === 0, ...post(port, "/webhooks/sendgrid", headers, body, { sent: 10, from }) };
  });
  const early = await answeredEarly(posts, 2);
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

t.test("addresses out of attempts are read only through the over-budget reads, one each; 429 beyond", async (t) => {
  const { port } = await serve({
    preauthThrottle: createAttemptThrottle({ perSecond: 0.001, burst: 2 }),
    unverifiedReads: { maxReads: 8, maxOverBudgetReads: 2 },
  });
  // Spend the budgets of three addresses.
  const [a, b, c] = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];
  for (const from of [a, b, c]) {
    for (let i = 0; i < 2; i++) {
      const bad = sendgrid(undefined, stranger.privateKey);
      t.equal((await post(port, "/webhooks/sendgrid", bad.headers, bad.body, { from }).answer).status, 401);
    }
  }

  // The first address holds an over-budget read with SendGrid's own post; its second post is
  // refused, so the other read is left for another address (here a stranger's post from it).
  const genuine = sendgrid();
  const held = [post(port, "/webhooks/sendgrid", genuine.headers, genuine.body, { sent: 10, from: a })];
  await pause(100);
  const second = sendgrid();
  const own = await within(
    post(port, "/webhooks/sendgrid", second.headers, second.body, { sent: 0, from: a }).answer,
    5000,
    "second post from the first address",
  );
  t.equal(own.status, 429, "an address holds one over-budget read: refused before its body is sent");
  t.ok(Number(own.headers["retry-after"]) >= 1, "with Retry-After");

  const bad = sendgrid(undefined, stranger.privateKey);
  held.push(post(port, "/webhooks/sendgrid", bad.headers, bad.body, { sent: 10, from: b }));
  await pause(100);
  const third = sendgrid();
  const limited = await within(
    post(port, "/webhooks/sendgrid", third.headers, third.body, { sent: 0, from: c }).answer,
    5000,
    "post from a third address",
  );
  t.equal(limited.status, 429, "the over-budget reads are taken: refused before its body is sent");
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

  // The reads are free again: a genuine post from each address is read, verified and processed.
  for (const from of [a, c]) {
    const again = sendgrid();
    t.equal((await post(port, "/webhooks/sendgrid", again.headers, again.body, { from }).answer).status, 200);
  }
});

t.test(
  "a body not arrived by the read's deadline is answered 408 and its read freed; the attempt stays spent",
  async (t) => {
    // One read in all, none for addresses out of attempts, one attempt per address, 500 ms to
    // send a body.
    const { port, lines } = await serve({
      preauthThrottle: createAttemptThrottle({ perSecond: 0.001, burst: 1 }),
      unverifiedReads: { maxReads: 1, maxOverBudgetReads: 0, readTimeoutMs: 500 },
    });
    for (const [from, chunked] of [
      ["127.0.0.2", false],
      ["127.0.0.3", true],
    ] as const) {
      // A signed post whose body stops after 10 bytes holds the only read.
      const signed = sendgrid();
      const slow = post(port, "/webhooks/sendgrid", signed.headers, signed.body, { sent: 10, from, chunked });
      await pause(100);
      const other = sendgrid();
      const busy = await within(
        post(port, "/webhooks/sendgrid", other.headers, other.body, { sent: 0, from: "127.0.0.9" }).answer,
        5000,
        "post while the read is held",
      );
      t.equal(busy.status, 503, `${chunked ? "chunked" : "declared length"}: the read is held`);

      const timedOut = await within(slow.answer, 5000, "the slow post, past its deadline");
      t.equal(timedOut.status, 408, "the slow post is answered 408 with its body unfinished");
      t.equal(timedOut.headers.connection, "close", "and its connection closed");
      t.match(JSON.parse(timedOut.body), { status: 408 });

      // The read is free while the slow client has still not sent its body.
      const next = sendgrid();
      const read = await within(
        post(port, "/webhooks/sendgrid", next.headers, next.body, { from: "127.0.0.9" }).answer,
        5000,
        "post after the deadline",
      );
      t.equal(read.status, 200, "another address's post is read and processed");

      // The abandoned post's attempt was not given back: the address has none left.
      const retry = sendgrid();
      const spent = await within(
        post(port, "/webhooks/sendgrid", retry.headers, retry.body, { from }).answer,
        5000,
        "the slow address's next post",
      );
      t.equal(spent.status, 429, "the slow address is out of attempts");
    }

    const logged = lines().map((line) => JSON.parse(line) as { level: number; status?: number; msg: string });
    t.equal(
      logged.filter((l) => l.msg === "request" && l.status === 408).length,
      2,
      "each abandoned post is logged as a 408",
    );
    t.same(
      logged.filter((l) => l.msg !== "request" && l.level >= 50),
      [],
      "no failure logged but the access lines",
    );
  },
);
