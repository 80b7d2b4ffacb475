import { startTcpProxy, startTestStack } from "@notify/testing";
import t from "tap";
import { createInboxClient, createInboxFeed, InboxApiError } from "../src/index.js";
import { doubled, recorder, service, startHttpProxy } from "./support.js";

// The live connection against the real service: items arrive as the workers store them, once
// each and oldest first, across an ingest restart, a dropped network and a renewed token; where
// a proxy between the user and the service blocks or buffers the stream, the list is polled and
// the stream taken up again once it works.

const { stack } = await startTestStack(t, { apps: ["ingest", "processor", "workers"] });
const { mint, revokeAll, send, stored, storedCount } = service(stack.baseUrl, stack.apiKey as string);

/** Short waits, so the test sees reconnects and polls within seconds. */
const quick = { pollIntervalMs: 300, reconnect: { initialMs: 50, maxMs: 400 } };

t.test("the feed shows a sent item at once, first, and its counts", async (t) => {
  const user = "live-user";
  await send(user, "before");
  await storedCount(user, 1);
  const feed = createInboxFeed(createInboxClient({ baseUrl: stack.baseUrl, token: await mint(user), ...quick }));
  await feed.start();
  t.teardown(() => feed.stop());
  await recorder().waitFor("the stream open", () => (feed.state.connection === "open" ? true : undefined));
  t.equal(feed.state.items.length, 1);
  await send(user, "live");
  const state = await recorder().waitFor("the live item", () =>
    feed.state.items.length === 2 && feed.state.counts?.unread === 2 ? feed.state : undefined,
  );
  t.match(state.items[0], { body: /live/ });
  t.match(state.items[1], { body: /before/ });
  t.same(state.counts, { unread: 2, unseen: 2, total: 2 }, "the stream's counts event");
});

t.test("across an ingest restart, every item arrives once, in order", async (t) => {
  const user = "restart-user";
  const seen = recorder();
  const client = createInboxClient({ baseUrl: stack.baseUrl, token: await mint(user), ...quick });
  const close = client.connect(seen.handlers, { lastEventId: "0" });
  t.teardown(close);
  await seen.waitFor("open", () => (seen.state === "open" ? true : undefined));
  await send(user, "r-0");
  await send(user, "r-1");
  await seen.waitFor("two items", () => (seen.items.length === 2 ? true : undefined));
  // Sent just before the restart: stored while the stream is down, or before it drops.
  await send(user, "r-2");
  await send(user, "r-3");
  await stack.restartApp("ingest");
  await send(user, "r-4");
  const all = await storedCount(user, 5);
  await seen.waitFor("five items", () => (seen.items.length >= 5 ? true : undefined));
  await seen.waitFor("open again", () => (seen.state === "open" ? true : undefined));
  t.same(doubled(seen.items), [], "none twice");
  t.same(
    seen.items.map((i) => i.id),
    all.map((i) => i.id).reverse(),
    "every stored item, oldest first",
  );
  const states = seen.states.map((s) => s.state);
  t.ok(states.indexOf("connecting", states.indexOf("open")) > 0, "the stream dropped and was opened again");
});

t.test("a dropped network: items stored meanwhile come with the resumed stream", async (t) => {
  const user = "cut-user";
  const ingest = new URL(stack.baseUrl);
  const proxy = await startTcpProxy({ host: ingest.hostname, port: Number(ingest.port) });
  t.teardown(() => proxy.close());
  const seen = recorder();
  const client = createInboxClient({ baseUrl: proxy.url("http"), token: await mint(user), ...quick });
  const close = client.connect(seen.handlers, { lastEventId: "0" });
  t.teardown(close);
  await seen.waitFor("open", () => (seen.state === "open" ? true : undefined));
  await send(user, "c-0");
  await seen.waitFor("the first item", () => (seen.items.length === 1 ? true : undefined));
  await proxy.cut();
  await send(user, "c-1");
  await send(user, "c-2");
  await storedCount(user, 3);
  await proxy.restore();
  await seen.waitFor("all three", () => (seen.items.length >= 3 ? true : undefined));
  await seen.waitFor("open again", () => (seen.state === "open" ? true : undefined));
  t.same(
    seen.items.map((i) => i.id),
    (await stored(user)).map((i) => i.id).reverse(),
  );
  t.same(doubled(seen.items), []);
});

t.test("a revoked token: the stream ends, the function gives a new token, the stream resumes", async (t) => {
  const user = "token-user";
  let calls = 0;
  const seen = recorder();
  const client = createInboxClient({
    baseUrl: stack.baseUrl,
    token: async () => {
      calls += 1;
      // The stream ends as the revocation applies, before its answer: a token minted in the
      // same millisecond would count as revoked too.
      await new Promise((resolve) => setTimeout(resolve, 5));
      return mint(user);
    },
    ...quick,
  });
  const close = client.connect(seen.handlers, { lastEventId: "0" });
  t.teardown(close);
  await seen.waitFor("open", () => (seen.state === "open" ? true : undefined));
  await send(user, "t-0");
  await seen.waitFor("the first item", () => (seen.items.length === 1 ? true : undefined));
  await revokeAll(user);
  await seen.waitFor("a new token", () => (calls >= 2 ? true : undefined));
  await send(user, "t-1");
  await seen.waitFor("the item after", () => (seen.items.length === 2 ? true : undefined));
  t.equal(seen.state, "open");
  t.equal(calls, 2);
  t.same(doubled(seen.items), []);

  // A plain string cannot be renewed: the connection closes with the reason.
  const plain = recorder();
  const fixed = createInboxClient({ baseUrl: stack.baseUrl, token: await mint(user), ...quick });
  t.teardown(fixed.connect(plain.handlers));
  await plain.waitFor("open", () => (plain.state === "open" ? true : undefined));
  await revokeAll(user);
  const closed = await plain.waitFor("closed", () => plain.states.find((s) => s.state === "closed"));
  t.ok(closed.error instanceof InboxApiError);
  t.match(closed.error, { status: 401, problem: { code: "token_ended", reason: "revoked" } });
});

for (const blocking of ["an HTML error page", "a buffered stream"] as const) {
  t.test(`a proxy answering the stream with ${blocking}: the list is polled, then the stream taken up`, async (t) => {
    const user = `blocked-${blocking.length}`;
    let blocked = true;
    const proxy = await startHttpProxy(stack.baseUrl, (req, res) => {
      if (!blocked || !req.url?.startsWith("/api/v1/inbox/stream")) return false;
      if (blocking === "an HTML error page") {
        res.writeHead(404, { "content-type": "text/html" }).end("<html><body>Not Found</body></html>");
      } else {
        // Headers at once, the body held back (a proxy buffering it): no byte ever comes.
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.flushHeaders();
      }
      return true;
    });
    t.teardown(() => proxy.close());
    const seen = recorder();
    const client = createInboxClient({ baseUrl: proxy.url, token: await mint(user), openTimeoutMs: 300, ...quick });
    await send(user, "p-0");
    await storedCount(user, 1);
    const close = client.connect(seen.handlers, { lastEventId: "0" });
    t.teardown(close);
    await seen.waitFor("polling", () => (seen.state === "polling" ? true : undefined));
    await seen.waitFor("the stored item, polled", () => (seen.items.length === 1 ? true : undefined));
    await send(user, "p-1");
    await seen.waitFor("the item sent while polling", () => (seen.items.length === 2 ? true : undefined));
    await seen.waitFor("the counts, polled", () => (seen.counts.at(-1)?.unread === 2 ? true : undefined));
    t.notOk(
      seen.states.some((s) => s.state === "open"),
      "the stream never opened",
    );

    blocked = false;
    await seen.waitFor("the stream taken up", () => (seen.state === "open" ? true : undefined));
    await send(user, "p-2");
    await seen.waitFor("the item after", () => (seen.items.length === 3 ? true : undefined));
    t.same(
      seen.items.map((i) => i.id),
      (await stored(user)).map((i) => i.id).reverse(),
    );
    t.same(doubled(seen.items), []);
  });
}

t.test("a 503 with Retry-After: the next attempt waits as long", async (t) => {
  const user = "retry-after-user";
  const attempts: number[] = [];
  const proxy = await startHttpProxy(stack.baseUrl, (req, res) => {
    if (!req.url?.startsWith("/api/v1/inbox/stream")) return false;
    attempts.push(Date.now());
    if (attempts.length > 1) return false;
    res
      .writeHead(503, { "content-type": "application/problem+json", "retry-after": "2" })
      .end(JSON.stringify({ title: "Unavailable", status: 503, code: "dependency_unavailable", detail: "busy" }));
    return true;
  });
  t.teardown(() => proxy.close());
  const seen = recorder();
  const client = createInboxClient({ baseUrl: proxy.url, token: await mint(user), ...quick });
  t.teardown(client.connect(seen.handlers));
  await seen.waitFor("open", () => (seen.state === "open" ? true : undefined));
  t.equal(attempts.length, 2);
  t.ok((attempts[1] as number) - (attempts[0] as number) >= 2000, "not before the 2 s it asked for");
});
