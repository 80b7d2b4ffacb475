import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { ProviderAnswer } from "@notify/core";
import { createSendgridProvider, type OutboundMessage, type SendgridConfig } from "@notify/providers";
import fc from "fast-check";
import t from "tap";
import { createSendgridSandbox, type SandboxFault, type SandboxMail, startSendgridSandbox } from "../../src/index.js";

const API_KEY = "SG.sandbox-test-key";
const sandbox = await startSendgridSandbox({ apiKey: API_KEY });
t.teardown(() => sandbox.close());
t.beforeEach(() => sandbox.reset());

const provider = (overrides: Partial<SendgridConfig> = {}) =>
  createSendgridProvider({
    apiKey: API_KEY,
    baseUrl: sandbox.url,
    from: "noreply@notify.example",
    fromName: "Notify",
    timeoutMs: 2000,
    ...overrides,
  });

const message = (overrides: Partial<OutboundMessage> = {}): OutboundMessage => ({
  notificationId: randomUUID(),
  channel: "email",
  to: "ada@example.com",
  subject: "Welcome",
  body: "<html><head><title>x</title></head><body><p>Hello &amp; welcome</p><p>Ada</p></body></html>",
  category: "welcome",
  priority: "transactional",
  ...overrides,
});

const post = (path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(`${sandbox.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json", ...headers },
    body,
  });

const validMail = (to = "ada@example.com", customArgs: Record<string, string> = {}) => ({
  personalizations: [{ to: [{ email: to }], custom_args: customArgs }],
  from: { email: "noreply@notify.example" },
  subject: "Hi",
  content: [{ type: "text/plain", value: "Hi" }],
});

const listMessages = async (query: string): Promise<SandboxMail[]> => {
  const res = await fetch(`${sandbox.url}/sandbox/messages${query}`);
  return ((await res.json()) as { data: SandboxMail[] }).data;
};

t.test("sends through @sendgrid/mail and the sandbox keeps the mail", async (t) => {
  const msg = message();
  const result = await provider().send(msg);
  const [mail, ...rest] = sandbox.messages();
  t.same(rest, []);
  if (!mail) throw new Error("the sandbox received nothing");
  t.same(result, { outcome: "accepted", providerId: mail.message_id });
  t.match(mail.message_id, /^[A-Za-z0-9_-]{22}$/);
  t.same(mail.to, [{ email: "ada@example.com" }]);
  t.same(mail.from, { email: "noreply@notify.example", name: "Notify" });
  t.equal(mail.subject, "Welcome");
  t.same(mail.custom_args, { notification_id: msg.notificationId, channel: "email" });
  t.same(mail.categories, ["welcome"]);
  t.same(mail.content, [
    { type: "text/plain", value: "Hello & welcome\n\nAda" },
    { type: "text/html", value: msg.body },
  ]);
});

t.test("the text part keeps links, lists and headings, and drops scripts and styles", async (t) => {
  const body =
    '<style>p{color:red}</style><h1>Your code</h1><p>Use <b>123456</b> or <a href="https://x.example/v?c=1">verify here</a>.</p>' +
    "<ul><li>one</li><li>two</li></ul><script>alert(1)</script>";
  t.equal((await provider().send(message({ body }))).outcome, "accepted");
  t.same(sandbox.messages()[0]?.content?.[0], {
    type: "text/plain",
    value: "Your code\n\nUse 123456 or verify here [https://x.example/v?c=1].\n\n * one\n * two",
  });
});

t.test("a body without text sends html only", async (t) => {
  const result = await provider().send(message({ body: '<img src="https://example.com/a.png">' }));
  t.equal(result.outcome, "accepted");
  t.same(sandbox.messages()[0]?.content, [{ type: "text/html", value: '<img src="https://example.com/a.png">' }]);
});

t.test("a null subject is permanent without calling SendGrid", async (t) => {
  t.match(await provider().send(message({ subject: null })), { outcome: "permanent" });
  t.same(sandbox.messages(), []);
});

t.test("classifies SendGrid failures", async (t) => {
  const cases: {
    name: string;
    fault: SandboxFault;
    expected: { outcome: ProviderAnswer["outcome"] } & Record<string, unknown>;
  }[] = [
    {
      name: "429 with Retry-After",
      fault: { status: 429, retry_after_seconds: 2 },
      expected: { outcome: "transient", status: 429, retryAfterMs: 2000, reason: /too many requests/ },
    },
    { name: "500", fault: { status: 500 }, expected: { outcome: "transient", status: 500 } },
    { name: "503", fault: { status: 503 }, expected: { outcome: "transient", status: 503 } },
    {
      name: "503 with Retry-After",
      fault: { status: 503, retry_after_seconds: 30 },
      expected: { outcome: "transient", status: 503, retryAfterMs: 30000 },
    },
    { name: "400", fault: { status: 400 }, expected: { outcome: "permanent", status: 400, reason: /Bad Request/ } },
    {
      name: "403",
      fault: { status: 403 },
      expected: { outcome: "permanent", status: 403, reason: /access forbidden/ },
    },
    { name: "413", fault: { status: 413 }, expected: { outcome: "permanent", status: 413, reason: /too large/ } },
  ];
  for (const { name, fault, expected } of cases) {
    sandbox.reset();
    sandbox.fault(fault);
    const result = await provider().send(message());
    t.match(result, expected, name);
    if (expected.outcome === "transient" && !("retryAfterMs" in expected)) {
      t.notOk("retryAfterMs" in result, `${name} has no retryAfterMs`);
    }
    t.same(sandbox.messages(), [], `${name} delivered nothing`);
  }
});

t.test("a wrong API key is permanent and the reason never carries a key", async (t) => {
  const wrongKey = "SG.wrong-key-that-must-not-leak";
  const result = await provider({ apiKey: wrongKey }).send(message());
  t.match(result, { outcome: "permanent", status: 401, reason: /API key/ });
  t.notMatch(JSON.stringify(result), wrongKey);
  t.notMatch(JSON.stringify(result), API_KEY);
});

t.test("a reason echoing the Authorization header is redacted", async (t) => {
  // A misbehaving proxy in front of SendGrid that quotes the request back in its error.
  const proxy = createServer((req, res) => {
    res.writeHead(502, { "content-type": "application/json" });
    res.end(JSON.stringify({ errors: [{ message: `upstream refused ${req.headers.authorization}` }] }));
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  t.teardown(() => proxy.close());
  const { port } = proxy.address() as AddressInfo;
  const result = await provider({ baseUrl: `http://127.0.0.1:${port}` }).send(message());
  t.match(result, { outcome: "transient", status: 502, reason: "upstream refused Bearer [redacted]" });
  t.notMatch(JSON.stringify(result), API_KEY);
});

t.test("a send held past timeoutMs is a transient timeout", async (t) => {
  sandbox.fault({ delay_ms: 3000, times: 1 });
  const started = performance.now();
  const result = await provider({ timeoutMs: 150 }).send(message());
  t.match(result, { outcome: "transient", reason: /timed out after 150 ms/ });
  t.ok(performance.now() - started < 2900, "did not wait for the held answer");
  // The held send lands after its delay: let it, so it is not counted by a later test.
  while (sandbox.holding() > 0) await new Promise((resolve) => setTimeout(resolve, 50));
});

t.test("an unreachable endpoint is transient", async (t) => {
  const gone = await startSendgridSandbox();
  await gone.close();
  t.match(await provider({ baseUrl: gone.url }).send(message()), {
    outcome: "transient",
    reason: /unreachable: ECONNREFUSED/,
    notSent: true,
  });
});

t.test("faults honour times and match_to", async (t) => {
  sandbox.fault({ status: 503, times: 1, match_to: "Bob@Example.com" });
  const p = provider();
  t.match(await p.send(message({ to: "ada@example.com" })), { outcome: "accepted" }, "other recipients pass");
  t.match(await p.send(message({ to: "bob@example.com" })), { outcome: "transient", status: 503 });
  t.match(await p.send(message({ to: "bob@example.com" })), { outcome: "accepted" }, "spent after times");
});

t.test("faults over HTTP", async (t) => {
  const set = await post("/sandbox/faults", JSON.stringify({ status: 500 }));
  t.equal(set.status, 204);
  t.match(await provider().send(message()), { outcome: "transient", status: 500 });
  t.match(await provider().send(message()), { outcome: "transient", status: 500 }, "unlimited without times");
  t.equal((await fetch(`${sandbox.url}/sandbox/faults`, { method: "DELETE" })).status, 204);
  t.match(await provider().send(message()), { outcome: "accepted" });

  const invalid = await post("/sandbox/faults", JSON.stringify({ times: 2 }));
  t.equal(invalid.status, 400);
  t.match(await invalid.json(), { errors: [{ message: /a status, a delay_ms or an event/ }] });
  t.equal((await post("/sandbox/faults", JSON.stringify({ status: 200 }))).status, 400);
});

t.test("the sandbox answers like SendGrid", async (t) => {
  const accepted = await post("/v3/mail/send", JSON.stringify(validMail()));
  t.equal(accepted.status, 202);
  t.equal(await accepted.text(), "");
  t.match(accepted.headers.get("x-message-id"), /^[A-Za-z0-9_-]{22}$/);

  const badJson = await post("/v3/mail/send", "{not json");
  t.equal(badJson.status, 400);
  t.same(await badJson.json(), { errors: [{ message: "Bad Request", field: null, help: null }] });

  const { from: _, ...withoutFrom } = validMail();
  const noFrom = await post("/v3/mail/send", JSON.stringify(withoutFrom));
  t.equal(noFrom.status, 400);
  t.match(await noFrom.json(), {
    errors: [
      { message: /^The from object must be provided/, field: "from.email", help: /errors\.html#message\.from$/ },
    ],
  });

  const badAddress = await post("/v3/mail/send", JSON.stringify(validMail("not-an-address")));
  t.match(await badAddress.json(), {
    errors: [{ message: "Does not contain a valid address.", field: "personalizations.0.to.0.email" }],
  });

  const empty = await post("/v3/mail/send", "{}");
  const fields = ((await empty.json()) as { errors: { field: string }[] }).errors.map((e) => e.field);
  t.same(fields, ["personalizations", "from.email", "subject", "content"], "every problem at once");

  const subjectPerPersonalization = {
    ...validMail(),
    subject: undefined,
    personalizations: [{ to: [{ email: "ada@example.com" }], subject: "Per recipient" }],
  };
  t.equal((await post("/v3/mail/send", JSON.stringify(subjectPerPersonalization))).status, 202);

  const noAuth = await fetch(`${sandbox.url}/v3/mail/send`, { method: "POST", body: JSON.stringify(validMail()) });
  t.equal(noAuth.status, 401);
  const wrongKey = await post("/v3/mail/send", JSON.stringify(validMail()), { authorization: "Bearer SG.other" });
  t.equal(wrongKey.status, 401);
  t.same(await wrongKey.json(), {
    errors: [{ message: "The provided authorization grant is invalid, expired, or revoked", field: null, help: null }],
  });

  const huge = JSON.stringify({ ...validMail(), padding: "x".repeat(30 * 1024 * 1024) });
  const tooLarge = await post("/v3/mail/send", huge);
  t.equal(tooLarge.status, 413);
  t.match(await tooLarge.json(), { errors: [{ message: /too large/ }] });

  t.equal(sandbox.messages().length, 2, "only the valid sends were kept");
});

t.test("GET /sandbox/messages filters by recipient and custom args", async (t) => {
  await post(
    "/v3/mail/send",
    JSON.stringify(validMail("ada@example.com", { notification_id: "n1", channel: "email" })),
  );
  await post(
    "/v3/mail/send",
    JSON.stringify(validMail("bob@example.com", { notification_id: "n2", channel: "email" })),
  );
  await post(
    "/v3/mail/send",
    JSON.stringify(validMail("ada@example.com", { notification_id: "n3", channel: "email" })),
  );

  t.same((await listMessages("")).length, 3);
  t.same(
    (await listMessages("?to=ADA@example.com")).map((m) => m.custom_args.notification_id),
    ["n1", "n3"],
    "recipient match ignores case",
  );
  t.same(
    (await listMessages("?custom_arg.notification_id=n2")).map((m) => m.to),
    [[{ email: "bob@example.com" }]],
  );
  t.same(await listMessages("?to=ada@example.com&custom_arg.notification_id=n2"), [], "filters combine");
  t.same(await listMessages("?custom_arg.channel=email&custom_arg.notification_id=n3").then((m) => m.length), 1);

  t.equal((await fetch(`${sandbox.url}/sandbox/messages`, { method: "DELETE" })).status, 204);
  t.same(await listMessages(""), []);
});

const isErrorDetail = (value: unknown): boolean => {
  const e = (typeof value === "object" && value !== null ? value : {}) as Record<string, unknown>;
  return (
    typeof e.message === "string" &&
    e.message.length > 0 &&
    (e.field === null || typeof e.field === "string") &&
    (e.help === null || typeof e.help === "string")
  );
};

const sendTo = (app: ReturnType<typeof createSendgridSandbox>["app"], body: string) =>
  app.request("/v3/mail/send", { method: "POST", headers: { authorization: "Bearer SG.any" }, body });

t.test("any JSON body gets a 202 or a SendGrid-shaped 400", async (t) => {
  const { app } = createSendgridSandbox();
  const loose = fc
    .record(
      {
        personalizations: fc.array(
          fc.record({ to: fc.array(fc.record({ email: fc.oneof(fc.emailAddress(), fc.string()) })) }),
        ),
        from: fc.record({ email: fc.oneof(fc.emailAddress(), fc.string()) }),
        subject: fc.string(),
        content: fc.array(fc.record({ type: fc.string(), value: fc.string() })),
      },
      { requiredKeys: [] },
    )
    .map((body) => JSON.stringify(body));
  await t.resolves(
    fc.assert(
      fc.asyncProperty(fc.oneof(fc.json(), loose), async (body) => {
        const res = await sendTo(app, body);
        if (res.status === 202) return true;
        const { errors } = (await res.json()) as { errors: unknown[] };
        return res.status === 400 && errors.length > 0 && errors.every(isErrorDetail);
      }),
    ),
  );
});

t.test("every well-formed mail is accepted and kept per personalization", async (t) => {
  const sandbox = createSendgridSandbox();
  const nonEmpty = fc.string({ minLength: 1 });
  const mail = fc.record({
    personalizations: fc.array(
      fc.record({
        to: fc.array(fc.record({ email: fc.emailAddress() }), { minLength: 1, maxLength: 3 }),
        custom_args: fc.dictionary(nonEmpty, fc.string()),
      }),
      { minLength: 1, maxLength: 3 },
    ),
    from: fc.record({ email: fc.emailAddress() }),
    subject: nonEmpty,
    content: fc.array(fc.record({ type: nonEmpty, value: nonEmpty }), { minLength: 1, maxLength: 2 }),
  });
  await t.resolves(
    fc.assert(
      fc.asyncProperty(mail, async (body) => {
        sandbox.reset();
        const res = await sendTo(sandbox.app, JSON.stringify(body));
        const kept = sandbox.messages();
        return (
          res.status === 202 &&
          kept.length === body.personalizations.length &&
          kept.every(
            (m, i) =>
              m.message_id === res.headers.get("x-message-id") && m.to.length === body.personalizations[i]?.to.length,
          )
        );
      }),
    ),
  );
});
