import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";
import { seedApiKey, storeInboxItem } from "@notify/db";
import { listen } from "@notify/http";
import { eventually, seedNotification } from "@notify/testing";
import t from "tap";
import { ingestApp, type SseEvent, sseEvents } from "./support.js";

// docs/inbox.md as a newcomer meets it: its curl commands, run by curl itself through a shell
// against the app on a real socket, and the answers to the wrong credential on either side.
const { app, database } = await ingestApp(t);
const server = await listen(app, 0, "127.0.0.1");
t.teardown(() => server.close());
const base = `http://127.0.0.1:${server.port}`;
const apiKey = await seedApiKey(database, { clientId: "dev", name: "development key", scopes: ["operator"] });

const DOC_BASE = "http://127.0.0.1:3000";
const doc = readFileSync(new URL("../../../docs/inbox.md", import.meta.url), "utf8");
const firstBlock = /```sh\n([\s\S]*?)```/.exec(doc)?.[1] ?? "";
const [mint, list, stream] = firstBlock.split("\n").filter((line) => line.startsWith("curl "));

/** What the worker stores for an in-app notification of the development client. */
const store = async (userId: string, body: string) => {
  const notificationId = randomUUID();
  await seedNotification(database, { id: notificationId, clientId: "dev", userId });
  return storeInboxItem(database.sql, { userId, notificationId, category: "account", title: "Welcome", body });
};

/** A documented command, pointed at this test's server, with the doc's variables set. */
const local = (command: string | undefined) => {
  if (command === undefined || !command.includes(DOC_BASE)) throw new Error(`not a documented command: ${command}`);
  return command.replaceAll(DOC_BASE, base);
};
const env = (token = "") => ({ ...process.env, NOTIFY_KEY: apiKey, INBOX_TOKEN: token });
const run = async (command: string | undefined, token?: string) =>
  (await promisify(execFile)("sh", ["-c", local(command)], { env: env(token) })).stdout;

/** `curl -N` as a child process, its output split into SSE blocks as they arrive. */
function curlStream(command: string | undefined, token: string, t: { teardown(fn: () => unknown): void }) {
  const child: ChildProcess = spawn("sh", ["-c", `exec ${local(command)}`], { env: env(token) });
  t.teardown(() => child.kill());
  let text = "";
  child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
    text += chunk;
  });
  const events = (): SseEvent[] => sseEvents(text);
  const waitFor = (what: string, found: (events: SseEvent[]) => boolean) =>
    eventually(async () => (found(events()) ? events() : undefined), 10_000, what);
  return { events, waitFor };
}

t.test("docs/inbox.md has the three commands, on its base URL and $NOTIFY_KEY", async (t) => {
  t.match(mint, /^curl -sS -X POST http:\/\/127\.0\.0\.1:3000\/api\/v1\/users\/user-123\/inbox-tokens .*\$NOTIFY_KEY/);
  t.match(list, /^curl -sS http:\/\/127\.0\.0\.1:3000\/api\/v1\/inbox -H "X-Inbox-Token: \$INBOX_TOKEN"$/);
  t.match(stream, /^curl -N http:\/\/127\.0\.0\.1:3000\/api\/v1\/inbox\/stream -H "X-Inbox-Token: \$INBOX_TOKEN"$/);
});

t.test("the documented flow: mint, list, stream with curl -N, resume after Last-Event-ID", async (t) => {
  const minted = JSON.parse(await run(mint)) as { token: string; user_id: string };
  t.match(minted, { user_id: "user-123", token: /^ntu_/ });
  const token = minted.token;

  const first = await store("user-123", "stored before the stream");
  const page = JSON.parse(await run(list, token)) as { data: { id: string; body: string }[] };
  t.same(
    page.data.map((i) => [i.id, i.body]),
    [[String(first), "stored before the stream"]],
  );

  const live = curlStream(stream, token, t);
  // The counts and the comment are written right after the ready event, but may reach curl in
  // later chunks.
  const opening = await live.waitFor("the ready event, the counts and a comment", (events) => events.length >= 3);
  t.equal(opening[0]?.event, "ready");
  t.match(opening[1], { event: "counts", data: '{"unread":1,"unseen":1,"total":1}' }, "then the counts");
  t.equal(opening[2]?.comment, "keep-alive", "an idle stream sends a comment at once");
  const second = await store("user-123", "stored while streaming");
  const [delivered] = (await live.waitFor("a notification event", (e) => e.some((x) => x.event === "notification")))
    .filter((e) => e.event === "notification")
    .map((e) => ({ id: e.id, item: JSON.parse(e.data ?? "") as { id: string; body: string } }));
  t.match(delivered, { id: String(second), item: { id: String(second), body: "stored while streaming" } });

  const resumed = curlStream(`${stream} -H "Last-Event-ID: ${first}"`, token, t);
  const replayed = await resumed.waitFor("the replay", (e) => e.some((x) => x.event === "notification"));
  t.same(
    replayed.filter((e) => e.event === "notification").map((e) => e.id),
    [String(second)],
    "everything after Last-Event-ID, and only that",
  );
});

t.test("docs/inbox.md's preference, count and mark-all commands work as shown", async (t) => {
  const section = doc.slice(doc.indexOf("## Preferences, counts and mark-all"));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? "";
  const [read, change, count, markAll] = block.split("\n").filter((line) => line.startsWith("curl "));
  const { token } = JSON.parse(await run(mint)) as { token: string };
  await store("user-123", "to be marked read");
  t.match(JSON.parse(await run(read, token)), {
    channel_optout: [],
    categories: [{ category: "account", opted_out: false, locked: false }],
  });
  t.match(JSON.parse(await run(change, token)), { channel_optout: ["sms"], time_zone: "Europe/London" });
  const before = JSON.parse(await run(count, token)) as { unread: number; unseen: number; total: number };
  t.ok(before.unread > 0, `something to mark (${JSON.stringify(before)})`);
  t.same(JSON.parse(await run(markAll, token)), { ...before, unread: 0 });
});

t.test("the stream's answer suits curl and proxies", async (t) => {
  const { token } = JSON.parse(await run(mint)) as { token: string };
  const controller = new AbortController();
  const res = await fetch(`${base}/api/v1/inbox/stream`, {
    headers: { "x-inbox-token": token },
    signal: controller.signal,
  });
  t.teardown(() => controller.abort());
  t.equal(res.status, 200);
  t.match(res.headers.get("content-type"), /^text\/event-stream/);
  t.equal(res.headers.get("cache-control"), "no-cache");
  t.equal(res.headers.get("x-accel-buffering"), "no", "nginx passes events on instead of buffering them");
});

/** Both places an API key goes. */
const inApiKeyHeaders = (credential: string): Record<string, string>[] => [
  { authorization: `Bearer ${credential}` },
  { "x-api-key": credential },
];

interface Problem {
  status: number;
  code: string;
  detail: string;
}
const problem = async (t: { equal(a: unknown, b: unknown): void }, res: Response) => {
  t.equal(res.headers.get("content-type"), "application/problem+json");
  return { status: res.status, challenge: res.headers.get("www-authenticate"), body: (await res.json()) as Problem };
};

t.test("an API key sent to an inbox route is told to use an inbox token, and how to mint one", async (t) => {
  const routes = [
    ["GET", "/api/v1/inbox"],
    ["GET", "/api/v1/inbox/stream"],
    ["PATCH", "/api/v1/inbox/1"],
  ] as const;
  for (const [method, path] of routes) {
    for (const header of inApiKeyHeaders(apiKey)) {
      const { status, challenge, body } = await problem(t, await fetch(`${base}${path}`, { method, headers: header }));
      const what = `${method} ${path} with ${Object.keys(header)[0]}`;
      t.equal(status, 401, what);
      t.equal(challenge, 'InboxToken realm="notify-inbox"', what);
      t.equal(body.code, "unauthenticated", what);
      t.match(body.detail, /X-Inbox-Token/, what);
      t.match(body.detail, "POST /api/v1/users/{id}/inbox-tokens", what);
      t.match(body.detail, /not an API key/, what);
    }
  }
  const unknown = await problem(
    t,
    await fetch(`${base}/api/v1/inbox`, { headers: { authorization: "Bearer ntf_nope" } }),
  );
  t.match(
    unknown,
    { status: 401, body: { code: "unauthenticated", detail: /X-Inbox-Token/ } },
    "any API key, known or not",
  );
});

t.test("an inbox token in the API key's place on an inbox route is told which header it goes in", async (t) => {
  const { token } = JSON.parse(await run(mint)) as { token: string };
  for (const header of inApiKeyHeaders(token)) {
    const { status, challenge, body } = await problem(t, await fetch(`${base}/api/v1/inbox`, { headers: header }));
    t.equal(status, 401);
    t.equal(challenge, 'InboxToken realm="notify-inbox"');
    t.equal(body.code, "unauthenticated");
    t.match(body.detail, /inbox token goes in the X-Inbox-Token header/);
  }
});

t.test("an inbox token sent to an API-key route is told that route wants an API key", async (t) => {
  const { token } = JSON.parse(await run(mint)) as { token: string };
  const path = `${base}/api/v1/users/user-123/preferences`;

  const asHeader = await problem(t, await fetch(path, { headers: { "x-inbox-token": token } }));
  t.equal(asHeader.status, 401);
  t.equal(asHeader.challenge, 'Bearer realm="notify"');
  t.equal(asHeader.body.code, "unauthenticated");
  t.match(asHeader.body.detail, /needs an API key \(X-API-Key or Authorization: Bearer\)/);
  t.match(asHeader.body.detail, /inbox token .* only the \/api\/v1\/inbox routes/);

  for (const header of inApiKeyHeaders(token)) {
    const asKey = await problem(t, await fetch(path, { headers: header }));
    t.equal(asKey.status, 401);
    t.equal(asKey.challenge, 'Bearer realm="notify", error="invalid_token"');
    t.equal(asKey.body.code, "invalid_api_key");
    t.match(asKey.body.detail, /is an inbox token/);
    t.match(asKey.body.detail, /needs an API key/);
  }
});

t.test("an inbox token in the URL is refused, and the answer says where it goes", async (t) => {
  const { token } = JSON.parse(await run(mint)) as { token: string };
  const { status, challenge, body } = await problem(t, await fetch(`${base}/api/v1/inbox/stream?token=${token}`));
  t.equal(status, 400);
  t.equal(challenge, 'InboxToken realm="notify-inbox", error="invalid_request"');
  t.equal(body.code, "invalid_request");
  t.match(body.detail, /not accepted in the URL; send it in the X-Inbox-Token header/);
});
