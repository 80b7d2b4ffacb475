import { parseConfig } from "@notify/config";
import { verifyUnsubscribeToken, type WorkItem } from "@notify/core";
import { loadUnsubscribeKey } from "@notify/db";
import { startSendgridSandbox, startSmtpSandbox } from "@notify/devstack";
import { createSendgridProvider, createSmtpProvider } from "@notify/providers";
import t from "tap";
import { WorkersConfig } from "../src/config.js";
import { deliver } from "../src/delivery/deliver.js";
import { unsubscribeHeaders } from "../src/delivery/unsubscribe.js";
import { channelRow, harness, workItem } from "./helpers.js";

// List-Unsubscribe (RFC 2369) and List-Unsubscribe-Post (RFC 8058) on email, through SendGrid's
// v3 API and the SMTP failover alike, read back from the sandboxes' message listings: what the
// provider received over its real wire protocol.
const h = await harness(t);
const sendgrid = await startSendgridSandbox({ port: 0, apiKey: "SG.test" });
const smtp = await startSmtpSandbox({ user: "notify", password: "relay-secret" });
t.teardown(() => Promise.all([sendgrid.close(), smtp.close()]));
const smtpProvider = createSmtpProvider({
  url: smtp.smtpUrl,
  from: "n@example.com",
  timeoutMs: 3000,
  requireTls: false,
});
t.teardown(() => smtpProvider.close?.());
const [viaSendgrid] = h.gates([
  createSendgridProvider({ apiKey: "SG.test", baseUrl: sendgrid.url, from: "n@example.com", timeoutMs: 3000 }),
]);
const [viaSmtp] = h.gates([smtpProvider]);
if (!viaSendgrid || !viaSmtp) throw new Error("no gates");

const unsubscribe = unsubscribeHeaders(
  {
    baseUrl: "https://notify.example.com/",
    mailto: "unsubscribe@example.com",
    categories: ["digest", "otp"],
    criticalCategories: ["security", "otp"],
  },
  () => loadUnsubscribeKey(h.database),
);
const key = await loadUnsubscribeKey(h.database);

/** An email work item of client `c`, as the processor queues it. */
const email = async (options: Parameters<typeof workItem>[1]): Promise<WorkItem> => ({
  ...(await workItem(h.database, options)),
  client_id: "c",
});

/** The headers each sandbox lists for a notification, by lower-cased name. */
async function sendgridHeaders(id: string): Promise<Record<string, string>> {
  const listed = (await (await fetch(`${sendgrid.url}/sandbox/messages?custom_arg.notification_id=${id}`)).json()) as {
    data: Array<{ headers: Record<string, string> }>;
  };
  t.equal(listed.data.length, 1, "one message at SendGrid");
  return Object.fromEntries(Object.entries(listed.data[0]?.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
}
async function smtpHeaders(id: string): Promise<Record<string, string>> {
  const listed = (await (await fetch(`${smtp.url}/sandbox/messages`)).json()) as {
    data: Array<{ notification_id: string; headers: Record<string, string> }>;
  };
  const mine = listed.data.filter((m) => m.notification_id === id);
  t.equal(mine.length, 1, "one message at the relay");
  return mine[0]?.headers ?? {};
}

const LINK =
  /^<https:\/\/notify\.example\.com\/u\/([A-Za-z0-9_.-]+)>, <mailto:unsubscribe@example\.com\?subject=unsubscribe%20\1>$/;

for (const [provider, gate, headersOf] of [
  ["SendGrid", viaSendgrid, sendgridHeaders],
  ["SMTP", viaSmtp, smtpHeaders],
] as const) {
  t.test(
    `${provider}: a promotional email carries both headers, its link naming client, user and category`,
    async (t) => {
      const item = await email({ priority: "promotional", category: "news", userId: "ada" });
      t.same(await deliver(h.deps(gate, { unsubscribe }), item), { ack: true });
      t.match(await channelRow(h.database, item), { status: "delivered" });
      const headers = await headersOf(item.notification_id);
      const link = LINK.exec(headers["list-unsubscribe"] ?? "");
      t.ok(link, `List-Unsubscribe: ${headers["list-unsubscribe"]}`);
      t.same(verifyUnsubscribeToken(key, link?.[1] ?? ""), { clientId: "c", userId: "ada", category: "news" });
      t.equal(headers["list-unsubscribe-post"], "List-Unsubscribe=One-Click");
    },
  );

  t.test(`${provider}: a transactional email of a category not listed carries neither`, async (t) => {
    const item = await email({ priority: "transactional", category: "account" });
    t.same(await deliver(h.deps(gate, { unsubscribe }), item), { ack: true });
    const headers = await headersOf(item.notification_id);
    t.equal(headers["list-unsubscribe"], undefined);
    t.equal(headers["list-unsubscribe-post"], undefined);
  });

  t.test(`${provider}: a promotional email of a critical category carries neither`, async (t) => {
    // Routing sends it whatever the user's opt-outs: an unsubscribe link would do nothing.
    const item = await email({ priority: "promotional", category: "security" });
    t.same(await deliver(h.deps(gate, { unsubscribe }), item), { ack: true });
    t.match(await channelRow(h.database, item), { status: "delivered" });
    const headers = await headersOf(item.notification_id);
    t.equal(headers["list-unsubscribe"], undefined);
    t.equal(headers["list-unsubscribe-post"], undefined);
  });

  t.test(`${provider}: a critical category listed in UNSUBSCRIBE_CATEGORIES carries both`, async (t) => {
    const item = await email({ priority: "promotional", category: "otp" });
    t.same(await deliver(h.deps(gate, { unsubscribe }), item), { ack: true });
    t.match((await headersOf(item.notification_id))["list-unsubscribe"], LINK);
  });

  t.test(`${provider}: a transactional email of a listed category carries both`, async (t) => {
    const item = await email({ priority: "transactional", category: "digest" });
    t.same(await deliver(h.deps(gate, { unsubscribe }), item), { ack: true });
    const headers = await headersOf(item.notification_id);
    t.match(headers["list-unsubscribe"], LINK);
    t.equal(headers["list-unsubscribe-post"], "List-Unsubscribe=One-Click");
  });
}

t.test("without UNSUBSCRIBE_BASE_URL (no unsubscribe), or without a client on the item: no headers", async (t) => {
  const bare = await email({ priority: "promotional", category: "news" });
  t.same(await deliver(h.deps(viaSendgrid), bare), { ack: true });
  t.equal((await sendgridHeaders(bare.notification_id))["list-unsubscribe"], undefined);
  const { client_id: _, ...older } = await email({ priority: "promotional", category: "news" });
  t.same(await deliver(h.deps(viaSendgrid, { unsubscribe }), older), { ack: true });
  t.equal((await sendgridHeaders(older.notification_id))["list-unsubscribe"], undefined);
});

t.test("a key that cannot be read yet fails the attempt before the claim: retried, then sent", async (t) => {
  let reads = 0;
  const flaky = unsubscribeHeaders(
    { baseUrl: "https://notify.example.com/", categories: [], criticalCategories: [] },
    async () => {
      reads++;
      if (reads === 1) throw new Error("the database is away");
      return loadUnsubscribeKey(h.database);
    },
  );
  const item = await email({ priority: "promotional", category: "news" });
  const first = await deliver(h.deps(viaSendgrid, { unsubscribe: flaky }), item).catch((error: unknown) => error);
  t.not((first as { ack?: boolean }).ack, true, "the first attempt is not acked");
  t.match(await channelRow(h.database, item), { status: "pending" }, "nothing was settled");
  t.same(await deliver(h.deps(viaSendgrid, { unsubscribe: flaky }), item), { ack: true }, "the retry sends");
  t.match(await channelRow(h.database, item), { status: "delivered" }, "delivered, not unsettled");
  t.match((await sendgridHeaders(item.notification_id))["list-unsubscribe"], /notify\.example\.com\/u\//);
});

t.test("the workers read CRITICAL_CATEGORIES, with the processor's default", async (t) => {
  const env = { DATABASE_URL: "postgres://notify@127.0.0.1:5432/notify" };
  t.same(parseConfig(WorkersConfig, env).CRITICAL_CATEGORIES, ["security", "otp"]);
  t.same(parseConfig(WorkersConfig, { ...env, CRITICAL_CATEGORIES: "security, 2fa" }).CRITICAL_CATEGORIES, [
    "security",
    "2fa",
  ]);
  t.throws(() => parseConfig(WorkersConfig, { ...env, CRITICAL_CATEGORIES: "Security!" }), /CRITICAL_CATEGORIES/);
});
