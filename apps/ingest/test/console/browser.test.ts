import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually, startOtlpReceiver, startTestStack } from "@notify/testing";
import { launchBrowser, watchPage } from "@notify/testing/browser";
import type { Page } from "playwright-core";
import t from "tap";

// The operator's console in a real browser (Debian's Chromium through playwright-core) against
// the whole service running as real processes: an operator signs in with the development key (an
// operator key), finds a delivered notification and reads its timeline, replays a dead letter
// after a dry run, and watches SendGrid's breaker open while its sandbox fails. Screenshots of each view go to
// SCREENSHOT_DIR (`npm run docs:screenshots` writes docs/screenshots/), else to a temporary folder.
// Traced, so the notification page shows its trace id linked to a trace viewer.
const receiver = await startOtlpReceiver(t);
const TRACE_VIEWER = "http://traces.example/trace/{trace_id}";
const { stack, auth } = await startTestStack(t, {
  env: {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    CONSOLE_TRACE_URL: TRACE_VIEWER,
    BREAKER_MIN_CALLS: "3",
    BREAKER_WINDOW_CALLS: "10",
    RETRY_BASE_MS: "200",
    RETRY_MAX_MS: "500",
    WORKER_REPORT_INTERVAL_MS: "500",
    BROADCAST_BATCH_SIZE: "1",
  },
});
const { sendgrid } = stack.sandboxes;
const shots = process.env.SCREENSHOT_DIR ?? mkdtempSync(join(tmpdir(), "notify-console-shots-"));
mkdirSync(shots, { recursive: true });

const browser = await launchBrowser(t);
const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
const problems = watchPage(page);
const consoleUrl = `${stack.adminUrl}/console`;
const testid = (id: string) => page.getByTestId(id);
const shoot = (name: string) => page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });

const api = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
  const response = await fetch(`${stack.baseUrl}/api/v1${path}`, {
    method,
    headers: { ...auth, "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (response.status >= 300) throw new Error(`${method} ${path} answered ${response.status}: ${text}`);
  return text === "" ? null : JSON.parse(text);
};
/** A user of this file's own, reachable by email at an address no other test uses. */
const newUser = async () => {
  const user = `console-${randomUUID().slice(0, 8)}`;
  const email = `${user}@example.com`;
  await api("PUT", `/users/${user}/contacts`, { email, phone: null });
  return { user, email };
};
const send = async (user: string) =>
  (
    (await api(
      "POST",
      "/notifications",
      {
        user_id: user,
        category: "account",
        template_id: "welcome",
        data: { name: "Ada" },
        priority: "transactional",
        channels: ["email"],
      },
      { "idempotency-key": randomUUID() },
    )) as { notification_id: string }
  ).notification_id;
const emailStatus = async (id: string) =>
  ((await api("GET", `/notifications/${id}`)) as { channels: Record<string, { status: string }> }).channels.email
    ?.status;
const fault = (body: unknown) =>
  fetch(`${sendgrid}/sandbox/faults`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
const clearFaults = () => fetch(`${sendgrid}/sandbox/faults`, { method: "DELETE" });
/** Reloads until the element's text matches: pages are server-rendered, a reload reads again. */
const untilText = async (p: Page, id: string, wanted: RegExp, timeoutMs = 30_000) =>
  eventually(
    async () => {
      await p.reload();
      const element = p.getByTestId(id);
      return (await element.count()) > 0 && wanted.test((await element.innerText()).trim()) ? true : undefined;
    },
    timeoutMs,
    `${id} to read ${wanted}`,
  );

t.test("the operator signs in with the development key, an operator key", async (t) => {
  await page.goto(consoleUrl);
  t.match(page.url(), /\/console\/login/, "a visitor without a session is sent to the sign-in form");
  await shoot("login");
  await testid("login-key").fill(stack.apiKey as string);
  await testid("login-submit").click();
  await page.waitForURL(`${consoleUrl}`);
  t.equal(await testid("search-form").count(), 1, "the overview with its search form");
  const cookies = await page.context().cookies();
  const session = cookies.find((c) => c.name === "notify_console");
  t.ok(session?.httpOnly, "the session cookie is HttpOnly");
  t.equal(session?.sameSite, "Strict");
  t.notOk(
    cookies.some((c) => c.value.includes(stack.apiKey as string)),
    "the key itself is in no cookie",
  );
});

t.test("finds a delivered notification by id and reads its timeline", async (t) => {
  const { user } = await newUser();
  const id = await send(user);
  await eventually(async () => ((await emailStatus(id)) === "delivered" ? true : undefined), 30_000, "delivered");
  // SendGrid's sandbox reports a delivered event; its receipt is on the timeline too.
  await eventually(
    async () => {
      const view = (await api("GET", `/notifications/${id}`)) as { timeline: Array<{ event: string }> };
      return view.timeline.some((e) => e.event === "receipt") ? true : undefined;
    },
    30_000,
    "the delivered receipt",
  );

  await page.goto(consoleUrl);
  await testid("search-notification-id").fill(id);
  await testid("search-submit").click();
  await testid(`notification-${id}`).getByRole("link").first().click();
  await page.waitForURL(`${consoleUrl}/notifications/${id}`);
  t.equal((await testid("notification-id").innerText()).trim(), id);
  t.match(await testid("channel-status-email").innerText(), /delivered/);
  const traceId = ((await api("GET", `/notifications/${id}`)) as { trace_id: string | null }).trace_id;
  t.match(traceId, /^[0-9a-f]{32}$/, "traced");
  t.equal((await testid("trace-id").innerText()).trim(), traceId, "the page shows its trace id");
  t.equal(
    await testid("trace-id").getAttribute("href"),
    TRACE_VIEWER.replace("{trace_id}", traceId as string),
    "linked to the trace viewer",
  );
  const rows = await testid("timeline-entry").allInnerTexts();
  t.ok(
    rows.length >= 4,
    `the timeline has the accepted entry, the routing, the attempt and the receipt (${rows.length})`,
  );
  t.match(rows[0], /accepted/, "oldest first: accepted");
  t.ok(
    rows.some((r) => /attempt/.test(r) && /sendgrid/.test(r) && /accepted/.test(r)),
    "the attempt, with its provider and outcome",
  );
  t.ok(
    rows.some((r) => /receipt/.test(r) && /delivered/.test(r)),
    "SendGrid's delivered receipt",
  );
  await shoot("notification");

  // The same notification found by its user.
  await page.goto(consoleUrl);
  await testid("search-user-id").fill(user);
  await testid("search-submit").click();
  t.equal(await testid(`notification-${id}`).count(), 1, "found by user id");
  await shoot("search");
});

t.test("a dead letter: a dry run shows what would be sent, the replay sends it once", async (t) => {
  const { user, email } = await newUser();
  // SendGrid refuses this address once, permanently: the email is dead-lettered.
  await fault({ status: 400, match_to: email, times: 1 });
  const id = await send(user);
  await eventually(async () => ((await emailStatus(id)) === "failed" ? true : undefined), 30_000, "failed");
  await eventually(
    async () => {
      const page = (await api("GET", `/dead-letters?notification_id=${id}`)) as { data: unknown[] };
      return page.data.length > 0 ? true : undefined;
    },
    30_000,
    "the dead letter",
  );

  await page.goto(`${consoleUrl}/dead-letters?notification_id=${id}`);
  const row = page.locator('[data-testid^="dead-letter-"]').filter({ hasText: id });
  t.equal(await row.count(), 1, "the letter is listed");
  const seq = ((await row.getAttribute("data-testid")) ?? "").replace("dead-letter-", "");
  await testid(`select-${seq}`).check();
  await shoot("dead-letters");
  await testid("dry-run").click();
  const diff = await testid(`replay-diff-${seq}`).innerText();
  t.match(diff, /would replay/, "the dry run says it would replay");
  t.match(diff, new RegExp(email.replace(/[.]/g, "\\.")), "to the user's address");
  t.equal(await emailStatus(id), "failed", "a dry run changes nothing");
  await shoot("dead-letters-dry-run");

  await testid("replay-these").click();
  const results = await testid("replay-result").allInnerTexts();
  t.equal(results.length, 1);
  t.match(results[0], /replayed/);
  await eventually(async () => ((await emailStatus(id)) === "delivered" ? true : undefined), 30_000, "delivered");
  const received = (
    (await (await fetch(`${sendgrid}/sandbox/messages`)).json()) as {
      data: Array<{ custom_args: Record<string, string> }>;
    }
  ).data.filter((m) => m.custom_args.notification_id === id);
  t.equal(received.length, 1, "SendGrid received it once, from the replay");
});

t.test("SendGrid's breaker shows open while its sandbox is failing", async (t) => {
  t.teardown(clearFaults);
  await page.goto(`${consoleUrl}/providers`);
  t.match((await testid("breaker-sendgrid").innerText()).trim(), /closed/, "closed while SendGrid answers");
  await fault({ status: 503, for_ms: 60_000 });
  const { user } = await newUser();
  await Promise.all(Array.from({ length: 4 }, () => send(user)));
  await untilText(page, "breaker-sendgrid", /open/);
  t.match((await testid("breaker-sendgrid").innerText()).trim(), /^open/, "open: its work is parked or failed over");
  await shoot("providers");
  await page.goto(`${consoleUrl}/streams`);
  t.ok((await testid("streams").count()) === 1, "the streams page answers too");
  await shoot("streams");
  await page.goto(consoleUrl);
  t.match(await testid("summary-breaker-sendgrid").innerText(), /open/, "and the overview says so");
  await shoot("overview");
});

t.test("a broadcast paused and resumed from the console, its progress on the page", async (t) => {
  const audience = (await api("POST", "/audiences", { name: "console readers" })) as { id: string };
  // One member per batch (BROADCAST_BATCH_SIZE=1 below): expanding 500 takes long enough (seconds) to pause it.
  const members = Array.from({ length: 500 }, (_, i) => JSON.stringify(`reader-${i}`)).join("\n");
  const imported = await fetch(`${stack.baseUrl}/api/v1/audiences/${audience.id}/members/import`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/x-ndjson" },
    body: members,
  });
  t.equal(imported.status, 200);
  const broadcast = (await api(
    "POST",
    "/broadcasts",
    { audience_id: audience.id, category: "news", template_id: "welcome", data: { name: "all" }, channels: ["in_app"] },
    { "idempotency-key": randomUUID() },
  )) as { broadcast_id: string };
  const id = broadcast.broadcast_id;
  const progress = async () => (await api("GET", `/broadcasts/${id}`)) as { status: string; expanded: number };

  await page.goto(`${consoleUrl}/broadcasts`);
  t.match(await testid(`broadcast-status-${id}`).innerText(), /expanding/);
  await testid(`pause-${id}`).click();
  t.match(await testid(`broadcast-status-${id}`).innerText(), /paused/, "paused, as the page says after the click");
  const held = (await progress()).expanded;
  t.ok(held < 500, `paused part-way (${held} of 500)`);
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const after = await progress();
  // The batch in hand when it was paused may still finish: one member here.
  t.ok(after.expanded <= held + 1, `no further batch while paused (${after.expanded})`);
  t.equal(after.status, "paused");
  await shoot("broadcasts");

  await testid(`resume-${id}`).click();
  await untilText(page, `broadcast-status-${id}`, /expanded/, 60_000);
  t.equal((await progress()).expanded, 500, "resumed from where it stopped: every member, once");
});

t.test("the pages raised no error in the browser", async (t) => {
  t.same(problems, [], "no console error, page error or failed request");
});
