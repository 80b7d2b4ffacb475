import { randomUUID } from "node:crypto";
import { createServer as createHttpServer } from "node:http";
import { type AddressInfo, createServer } from "node:net";
import type { WorkItem } from "@notify/core";
import { type SandboxFault, startSendgridSandbox } from "@notify/devstack";
import { createSendgridProvider } from "@notify/providers";
import { freePort } from "@notify/testing";
import t, { type Test } from "tap";
import { deliver } from "../src/delivery/deliver.js";
import {
  channelRow,
  deadLetters,
  type FakeAnswer,
  fakeProvider,
  harness,
  startFakeProviderServer,
  workItem,
} from "./helpers.js";

// Every provider failure class, table-driven, through deliver(): what the channel becomes and
// whether the item is retried, dead-lettered or left unsettled (invariant 7).
const h = await harness(t);
const sandbox = await startSendgridSandbox({ port: 0, apiKey: "SG.test" });
t.teardown(() => sandbox.close());
const sendgrid = (apiKey: string, baseUrl = sandbox.url) =>
  createSendgridProvider({ apiKey, baseUrl, from: "n@example.com", timeoutMs: 1000 });
const [emailGate] = h.gates([sendgrid("SG.test")]);
const [wrongKeyGate] = h.gates([sendgrid("SG.wrong")]);
const [unreachableGate] = h.gates([sendgrid("SG.test", `http://127.0.0.1:${await freePort()}`)]);
// A name that never resolves (RFC 2606 reserves .invalid), TLS spoken to a plain HTTP port, and a
// server that reads the whole request and then drops the connection without an answer.
const [dnsGate] = h.gates([sendgrid("SG.test", "http://sendgrid.notify.invalid")]);
const [tlsGate] = h.gates([sendgrid("SG.test", sandbox.url.replace("http://", "https://"))]);
const dropper = createServer((socket) => socket.once("data", () => setTimeout(() => socket.resetAndDestroy(), 20)));
await new Promise<void>((resolve) => dropper.listen(0, "127.0.0.1", resolve));
t.teardown(() => new Promise((resolve) => dropper.close(resolve)));
const [dropGate] = h.gates([sendgrid("SG.test", `http://127.0.0.1:${(dropper.address() as AddressInfo).port}`)]);
// A proxy (or a wrong base URL) that redirects the send elsewhere on the same host, where it
// would be accepted: a redirect followed would send the mail there.
let followed = 0;
const redirector = createHttpServer((req, res) => {
  req.resume();
  req.once("end", () => {
    if (!req.url?.startsWith("/moved/"))
      return res.writeHead(307, { location: `/moved${req.url}?signature=secret` }).end();
    followed += 1;
    res.writeHead(202, { "x-message-id": "followed" }).end();
  });
});
await new Promise<void>((resolve) => redirector.listen(0, "127.0.0.1", resolve));
t.teardown(() => new Promise((resolve) => redirector.close(resolve)));
const [redirectGate] = h.gates([sendgrid("SG.test", `http://127.0.0.1:${(redirector.address() as AddressInfo).port}`)]);
const push = await startFakeProviderServer(t);
const [pushGate] = h.gates([fakeProvider({ name: "fakepush", channel: "push", url: push.url, timeoutMs: 1000 })]);
if (
  !emailGate ||
  !wrongKeyGate ||
  !unreachableGate ||
  !dnsGate ||
  !tlsGate ||
  !dropGate ||
  !redirectGate ||
  !pushGate
) {
  throw new Error("gates");
}

type Expect = { status: string; disposition: "ack" | "retry"; deadLetter?: string; minDelayMs?: number };

const emailCases: Array<{
  name: string;
  fault?: Omit<SandboxFault, "match_to">;
  gate?: typeof emailGate;
  expect: Expect;
  /** What else the case checks once the item is handled. */
  after?: (t: Test, item: WorkItem) => Promise<void> | void;
}> = [
  { name: "202 accepted", expect: { status: "delivered", disposition: "ack" } },
  {
    name: "400 invalid address",
    fault: { status: 400 },
    expect: { status: "failed", disposition: "ack", deadLetter: "permanent" },
  },
  {
    name: "401 revoked API key",
    gate: wrongKeyGate,
    expect: { status: "failed", disposition: "ack", deadLetter: "permanent" },
  },
  {
    name: "403 forbidden",
    fault: { status: 403 },
    expect: { status: "failed", disposition: "ack", deadLetter: "permanent" },
  },
  {
    name: "413 payload too large",
    fault: { status: 413 },
    expect: { status: "failed", disposition: "ack", deadLetter: "permanent" },
  },
  {
    name: "429 with Retry-After",
    fault: { status: 429, retry_after_seconds: 3 },
    expect: { status: "retrying", disposition: "retry", minDelayMs: 3000 },
  },
  { name: "408 request timeout", fault: { status: 408 }, expect: { status: "retrying", disposition: "retry" } },
  { name: "500", fault: { status: 500 }, expect: { status: "retrying", disposition: "retry" } },
  { name: "502", fault: { status: 502 }, expect: { status: "retrying", disposition: "retry" } },
  { name: "503", fault: { status: 503 }, expect: { status: "retrying", disposition: "retry" } },
  { name: "504 gateway timeout", fault: { status: 504 }, expect: { status: "retrying", disposition: "retry" } },
  {
    name: "no answer within the deadline (may have accepted)",
    fault: { delay_ms: 2500 },
    expect: { status: "unsettled", disposition: "ack", deadLetter: "outcome_unknown" },
  },
  {
    name: "connection refused (never reached SendGrid: retried)",
    gate: unreachableGate,
    expect: { status: "retrying", disposition: "retry" },
  },
  {
    name: "DNS failure (never reached SendGrid: retried)",
    gate: dnsGate,
    expect: { status: "retrying", disposition: "retry" },
  },
  {
    name: "TLS handshake failure (never reached SendGrid: retried)",
    gate: tlsGate,
    expect: { status: "retrying", disposition: "retry" },
  },
  {
    // Followed, the mail would go wherever the redirect points (and a 301/302 as a GET).
    name: "307 redirect (not followed: nothing sent)",
    gate: redirectGate,
    expect: { status: "failed", disposition: "ack", deadLetter: "permanent" },
    after: async (t, item) => {
      t.equal(followed, 0, "the redirect was not followed");
      const row = await channelRow(h.database, item);
      t.match(row?.reason, /^sendgrid 307: redirected to \/moved\/v3\/mail\/send, not followed/, "where it pointed");
      t.notMatch(row?.reason, /secret/, "without its query");
    },
  },
  {
    name: "connection reset after the request was written (may have accepted)",
    gate: dropGate,
    expect: { status: "unsettled", disposition: "ack", deadLetter: "outcome_unknown" },
  },
];

for (const c of emailCases) {
  t.test(`sendgrid: ${c.name} -> ${c.expect.status}`, async (t) => {
    const to = `${randomUUID()}@example.com`;
    if (c.fault) sandbox.fault({ ...c.fault, match_to: to } as SandboxFault);
    const item = await workItem(h.database, { to });
    const disposition = await deliver(h.deps(c.gate ?? emailGate), item);
    t.equal("ack" in disposition ? "ack" : "retryInMs" in disposition ? "retry" : "terminate", c.expect.disposition);
    if (c.expect.minDelayMs !== undefined) {
      t.ok("retryInMs" in disposition && disposition.retryInMs >= c.expect.minDelayMs, "Retry-After honoured");
    }
    t.match(await channelRow(h.database, item), { status: c.expect.status, attempts: 1 });
    const letters = await deadLetters(h.bus, item.notification_id);
    t.same(
      letters.map((l) => l.class),
      c.expect.deadLetter ? [c.expect.deadLetter] : [],
    );
    await c.after?.(t, item);
  });
}

const subscription = (endpoint: string) => ({ endpoint, keys: { p256dh: "BAAA", auth: "AAAA" } });

async function pushUser(endpoints: string[]) {
  const userId = `user-${randomUUID()}`;
  const tokens = endpoints.map(subscription);
  await h.database
    .sql`insert into user_preferences (user_id, device_tokens) values (${userId}, ${h.database.sql.json(tokens)})`;
  const item = await workItem(h.database, { channel: "push", userId, to: JSON.stringify(tokens) });
  return { userId, item };
}

const tokensOf = async (userId: string) =>
  (
    await h.database.sql<{ endpoints: string[] }[]>`
      select coalesce(array_agg(t->>'endpoint'), '{}') as endpoints
      from user_preferences, jsonb_array_elements(device_tokens) t where user_id = ${userId}`
  )[0]?.endpoints ?? [];

const pushCases: Array<{ name: string; answer: FakeAnswer; expect: Expect; removed: boolean }> = [
  { name: "201 created", answer: { status: 201 }, expect: { status: "delivered", disposition: "ack" }, removed: false },
  {
    name: "404 subscription gone",
    answer: { status: 404 },
    expect: { status: "failed", disposition: "ack", deadLetter: "permanent" },
    removed: true,
  },
  {
    name: "410 subscription expired",
    answer: { status: 410 },
    expect: { status: "failed", disposition: "ack", deadLetter: "permanent" },
    removed: true,
  },
  {
    name: "400 invalid token",
    answer: { status: 400 },
    expect: { status: "failed", disposition: "ack", deadLetter: "permanent" },
    removed: false,
  },
  {
    name: "413 payload too large",
    answer: { status: 413 },
    expect: { status: "failed", disposition: "ack", deadLetter: "permanent" },
    removed: false,
  },
  {
    name: "429 with Retry-After",
    answer: { status: 429, retryAfterSeconds: 2 },
    expect: { status: "retrying", disposition: "retry", minDelayMs: 2000 },
    removed: false,
  },
  { name: "408", answer: { status: 408 }, expect: { status: "retrying", disposition: "retry" }, removed: false },
  { name: "503", answer: { status: 503 }, expect: { status: "retrying", disposition: "retry" }, removed: false },
];

for (const c of pushCases) {
  t.test(`push: ${c.name} -> ${c.expect.status}${c.removed ? ", subscription removed" : ""}`, async (t) => {
    const endpoint = `https://push.example/${randomUUID()}`;
    push.answer((to) => (to.includes(endpoint) ? c.answer : { status: 201 }));
    const { userId, item } = await pushUser([endpoint]);
    const disposition = await deliver(h.deps(pushGate), item);
    t.equal("ack" in disposition ? "ack" : "retry", c.expect.disposition);
    if (c.expect.minDelayMs !== undefined) {
      t.ok("retryInMs" in disposition && disposition.retryInMs >= c.expect.minDelayMs, "Retry-After honoured");
    }
    t.match(await channelRow(h.database, item), { status: c.expect.status });
    t.same(await tokensOf(userId), c.removed ? [] : [endpoint]);
    t.same(
      (await deadLetters(h.bus, item.notification_id)).map((l) => l.class),
      c.expect.deadLetter ? [c.expect.deadLetter] : [],
    );
  });
}

t.test("push to several subscriptions: a gone one is removed, the others still deliver", async (t) => {
  const [ok, gone] = [`https://push.example/${randomUUID()}`, `https://push.example/${randomUUID()}`];
  push.answer((to) => (to.includes(gone) ? { status: 410 } : { status: 201 }));
  const { userId, item } = await pushUser([ok, gone]);
  t.same(await deliver(h.deps(pushGate), item), { ack: true });
  t.match(await channelRow(h.database, item), {
    status: "delivered",
    reason: /1 address accepted, 1 not: fakepush 410/,
  });
  t.same(await tokensOf(userId), [ok]);
});

t.test("push retry after a partial failure calls only the subscriptions that failed", async (t) => {
  const [ok, flaky] = [`https://push.example/${randomUUID()}`, `https://push.example/${randomUUID()}`];
  push.answer((to) => (to.includes(flaky) ? { status: 503 } : { status: 201 }));
  const { item } = await pushUser([ok, flaky]);
  const before = push.received.length;
  const first = await deliver(h.deps(pushGate), item);
  t.ok("retryInMs" in first, "retried for the failed subscription");
  t.equal(push.received.length - before, 1, "the good one received it");
  push.answer(() => ({ status: 201 }));
  t.same(await deliver(h.deps(pushGate), item), { ack: true });
  const sent = push.received.slice(before).map((r) => (r.to.includes(ok) ? "ok" : "flaky"));
  t.same(sent, ["ok", "flaky"], "each subscription got the notification exactly once");
  t.match(await channelRow(h.database, item), { status: "delivered", attempts: 2 });
});
