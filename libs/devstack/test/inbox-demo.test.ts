import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually, startTestStack } from "@notify/testing";
import { launchBrowser, watchPage } from "@notify/testing/browser";
import axe from "axe-core";
import type { Locator, Page } from "playwright-core";
import t from "tap";
import { freePort, ROOT, SAMPLE_NOTIFICATION, spawnApp } from "../src/index.js";

// The inbox demo page of `npm start` in a real browser (Debian's Chromium through playwright-core)
// against the whole service as real processes: <notify-inbox> and <notify-preferences> of
// @notify/inbox-elements on a product page of its own origin, for user-123, with tokens its
// server mints. An item sent shows up live, marking it read updates the badge, the stream
// survives ingest's restart with nothing lost or doubled (one item sent while it is down, through
// a second ingest), a preference saved in the form holds back the next notification, the bell
// and feed work from the keyboard alone, and axe-core finds nothing in either element, open or
// closed, in both themes. Screenshots go to SCREENSHOT_DIR (`npm run docs:screenshots` writes
// docs/screenshots/), else to a temporary folder.

// A stack, an ingest stopped and two started, and axe-core four times: longer than tap's 180 s under load.
t.setTimeout(360_000);

// The bundle the page loads, built from the sources in hand.
execFileSync(process.execPath, [join(ROOT, "libs", "inbox-elements", "scripts", "bundle.mjs")], { stdio: "pipe" });

const { stack, auth } = await startTestStack(t, {
  inboxDemo: true,
  // The processors' profile cache as shipped: a preference saved in the page applies to the very
  // next notification because ingest announces the change.
  appSettings: { processor: { PREFERENCE_CACHE_TTL_MS: "60000" } },
});
const demoUrl = stack.inboxDemoUrl as string;
const apiKey = stack.apiKey as string;
const shots = process.env.SCREENSHOT_DIR ?? mkdtempSync(join(tmpdir(), "notify-inbox-shots-"));
mkdirSync(shots, { recursive: true });

const browser = await launchBrowser(t);
const context = await browser.newContext({ viewport: { width: 1100, height: 760 }, reducedMotion: "reduce" });
const page = await context.newPage();
const problems = watchPage(page);
/** Every request the page made, with its headers: none may carry the API key. */
const sentHeaders: string[] = [];
page.on("request", (request) => sentHeaders.push(`${request.url()} ${JSON.stringify(request.headers())}`));

const inbox = page.locator("notify-inbox");
const bell = inbox.locator('[part~="bell"]');
const badge = inbox.locator('[part~="badge"]');
const panel = inbox.locator('[part~="panel"]');
const connection = inbox.locator('[part~="connection"]');
const items = inbox.locator("article");
const preferences = page.locator("notify-preferences");
const itemWith = (marker: string): Locator => items.filter({ hasText: marker });
const shoot = (name: string) => page.screenshot({ path: join(shots, `${name}.png`) });

/** POST /notifications for user-123 (through `baseUrl`), its in-app body carrying `marker`. */
const send = async (marker: string, channels = ["in_app"], baseUrl = stack.baseUrl) => {
  const response = await fetch(`${baseUrl}/api/v1/notifications`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json", "idempotency-key": randomUUID() },
    body: JSON.stringify({ ...SAMPLE_NOTIFICATION, data: { name: marker }, channels }),
  });
  if (response.status !== 202) throw new Error(`send answered ${response.status}: ${await response.text()}`);
  return ((await response.json()) as { notification_id: string }).notification_id;
};
const channelStatus = async (id: string, channel: string, baseUrl = stack.baseUrl) => {
  const response = await fetch(`${baseUrl}/api/v1/notifications/${id}`, { headers: auth });
  const view = (await response.json()) as { channels: Record<string, { status: string; reason?: string | null }> };
  return view.channels[channel];
};
/** A route of the inbox, with a token of the test's own: to read (or set) what the API holds. */
const inboxApi = async (path: string, body?: unknown) => {
  const minted = (await (
    await fetch(`${stack.baseUrl}/api/v1/users/user-123/inbox-tokens`, { method: "POST", headers: auth })
  ).json()) as { token: string };
  const response = await fetch(`${stack.baseUrl}/api/v1${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { "x-inbox-token": minted.token, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return response.json() as Promise<Record<string, unknown>>;
};
/** The element focus is on, through the shadow roots: its part, else its tag. */
const focused = () =>
  page.evaluate(`(() => {
    let at = document.activeElement;
    while (at && at.shadowRoot && at.shadowRoot.activeElement) at = at.shadowRoot.activeElement;
    return at ? at.getAttribute("part") || at.tagName.toLowerCase() : null;
  })()`) as Promise<string | null>;
const openPanel = async () => {
  if ((await bell.getAttribute("aria-expanded")) !== "true") await bell.click();
  await panel.waitFor({ state: "visible" });
};
const live = () => inbox.locator('[part~="connection"][data-state="open"]').waitFor({ timeout: 30_000 });

type AxeResult = { id: string; nodes: Array<{ target: unknown[] }> };
/**
 * axe-core in the page (WCAG 2.x A and AA, and axe's best practices): the violations as "rule:
 * targets", and the rules it checked inside each element's shadow root (a target there is a
 * list of selectors, the host's first).
 */
const runAxe = async (p: Page) => {
  if (!(await p.evaluate("typeof window.axe === 'object'"))) await p.evaluate(axe.source);
  const result = (await p.evaluate(`axe.run(document, {
    runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"] },
  })`)) as { violations: AxeResult[]; passes: AxeResult[] };
  const inside = (host: string) =>
    result.passes
      .filter((rule) => rule.nodes.some((n) => Array.isArray(n.target[0]) && String(n.target[0][0]).includes(host)))
      .map((rule) => rule.id);
  return {
    violations: result.violations.map((v) => `${v.id}: ${JSON.stringify(v.nodes.map((n) => n.target))}`),
    inbox: inside("notify-inbox"),
    preferences: inside("notify-preferences"),
  };
};

t.test("the page embeds both elements; its server mints the token and keeps the key", async (t) => {
  const html = await (await fetch(demoUrl)).text();
  const script = await (await fetch(`${demoUrl}demo.js`)).text();
  t.notMatch(html, apiKey, "the key is not in the page");
  t.notMatch(script, apiKey, "nor in its script");
  t.match(html, "<notify-inbox");
  t.match(html, "<notify-preferences");
  t.match(html, "$NOTIFY_KEY", "the hint's curl names the key, without it");
  const minted = (await (await fetch(`${demoUrl}token`, { method: "POST" })).json()) as Record<string, unknown>;
  t.same(Object.keys(minted).sort(), ["expires_at", "token"], "the token and its expiry, nothing else");
  t.match(minted.token, /^ntu_/);
  const crossSite = await fetch(`${demoUrl}token`, { method: "POST", headers: { "sec-fetch-site": "cross-site" } });
  t.equal(crossSite.status, 403, "another site's page is not given one");
  // A page whose own name was rebound to 127.0.0.1 sends that name in Host.
  const rebound = await new Promise<number>((resolve, reject) => {
    const port = new URL(demoUrl).port;
    const req = httpRequest(
      { host: "127.0.0.1", port, path: "/token", method: "POST", headers: { host: `attacker.example:${port}` } },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on("error", reject);
    req.end();
  });
  t.equal(rebound, 403, "a request naming another host is refused");

  await page.goto(demoUrl);
  await preferences.locator('[part~="save"]').waitFor();
  t.equal(await bell.getAttribute("aria-expanded"), "false");
  t.equal(await badge.count(), 0, "no badge with nothing unread");
  t.match(await bell.getAttribute("aria-label"), /^Notifications$/);
  await openPanel();
  await live();
  t.match(await inbox.locator('[part~="empty"]').textContent(), /all caught up/, "the empty state");
});

t.test("an item sent appears at once, announced, and marking it read updates the badge", async (t) => {
  await openPanel();
  await live();
  const marker = `first-${randomUUID().slice(0, 8)}`;
  const started = Date.now();
  const id = await send(marker);
  await itemWith(marker).waitFor({ timeout: 15_000 });
  const latency = Date.now() - started;
  t.comment(`the item appeared ${latency} ms after the send was posted`);
  t.pass(`appeared (${latency} ms)`);
  t.match(await itemWith(marker).locator('[part~="item-title"]').textContent(), "Welcome");
  t.match(await itemWith(marker).locator('[part~="item-body"]').textContent(), `Hello ${marker}`);
  t.match(await itemWith(marker).locator('[part~="item-time"]').textContent(), /now|second/);
  await eventually(async () => ((await badge.textContent()) === "1" ? true : undefined), 10_000, "badge 1");
  t.match(await bell.getAttribute("aria-label"), /1 unread/, "the bell's name says so");
  const announced = await inbox.locator('[aria-live="polite"]').textContent();
  t.match(announced, /New notification: Welcome/, "the live region announced it");
  // The worker stores the item (which wakes the page) and then records the channel delivered, in
  // a statement of its own: the page may show the item a moment before.
  await eventually(
    async () => ((await channelStatus(id, "in_app"))?.status === "delivered" ? true : undefined),
    10_000,
    "the in-app channel delivered",
  );
  t.pass("the in-app channel is delivered");

  await itemWith(marker).locator('[part~="action-read"]').click();
  await badge.waitFor({ state: "detached", timeout: 10_000 });
  t.match(await bell.getAttribute("aria-label"), /^Notifications$/, "nothing unread");
  t.match(await itemWith(marker).getAttribute("part"), /item-read/);
  const counts = await eventually(
    async () => {
      const c = await inboxApi("/inbox/counts");
      return c.unread === 0 ? c : undefined;
    },
    10_000,
    "the server's count",
  );
  t.equal(counts.unread, 0, "the server agrees");
});

t.test("an item's text is shown as text, never as HTML", async (t) => {
  await openPanel();
  const marker = `<img src=x onerror="window.injected=1">${randomUUID().slice(0, 8)}`;
  await send(marker);
  const item = items.filter({ hasText: marker.slice(-8) });
  await item.waitFor({ timeout: 15_000 });
  t.equal(await item.locator("img").count(), 0, "no element made from the text");
  t.match(await item.locator('[part~="item-body"]').textContent(), "<img", "the markup shows as characters");
  t.equal(await page.evaluate("window.injected === undefined"), true, "nothing ran");
});

t.test("the stream survives ingest's restart: nothing lost, nothing doubled", async (t) => {
  t.same(problems, [], "no problem in the page before the outage");
  await openPanel();
  await live();
  const before = `before-${randomUUID().slice(0, 8)}`;
  await send(before);
  await itemWith(before).waitFor({ timeout: 15_000 });

  let since = Date.now();
  const took = (what: string) => {
    t.comment(`${what}: ${Date.now() - since} ms`);
    since = Date.now();
  };
  // Ingest stops; a second ingest takes the send made while the first is down.
  const streams = () => sentHeaders.filter((line) => line.includes("/inbox/stream")).length;
  const streamsBefore = streams();
  const code = await stack.apps.get("ingest")?.stop();
  took(`ingest stopped (exit code ${code}; the page asked for ${streams() - streamsBefore} streams meanwhile)`);
  const during = `during-${randomUUID().slice(0, 8)}`;
  try {
    const port = await freePort();
    const admin = await freePort();
    const second = spawnApp("ingest", { ...stack.appEnv, PORT: String(port), ADMIN_PORT: String(admin) });
    t.teardown(() => second.stop());
    await second.ready(`http://127.0.0.1:${admin}/readyz`, 60_000);
    took("a second ingest ready");
    await eventually(
      async () => ((await connection.getAttribute("data-state")) !== "open" ? true : undefined),
      15_000,
      "the page to see the stream gone",
    );
    const other = `http://127.0.0.1:${port}`;
    const duringId = await send(during, ["in_app"], other);
    await eventually(
      async () => ((await channelStatus(duringId, "in_app", other))?.status === "delivered" ? true : undefined),
      30_000,
      "the item sent during the outage to be stored",
    );
    took("the item sent during the outage stored");
  } finally {
    // Up again whatever happened, for the tests after this one.
    await stack.restartApp("ingest");
    took("ingest started again");
  }
  const after = `after-${randomUUID().slice(0, 8)}`;
  await send(after);
  for (const marker of [before, during, after]) await itemWith(marker).waitFor({ timeout: 45_000 });
  took("the page shows the items sent during and after the outage");
  await live();
  took("the page's stream open again");
  for (const marker of [before, during, after])
    t.equal(await itemWith(marker).count(), 1, `${marker.split("-")[0]}: once`);
  const ids = (await page.evaluate(`[...document.querySelector("notify-inbox").shadowRoot.querySelectorAll("article")]
    .map((item) => item.getAttribute("data-item-id"))`)) as string[];
  t.equal(new Set(ids).size, ids.length, "no item twice in the feed");
  const listed = (await inboxApi("/inbox?limit=100")).data as unknown[];
  t.equal(ids.length, listed.length, "the feed holds what the server holds");
  // The page's requests refused while ingest was down are the outage, not a fault of the page.
  const outage = problems.splice(0);
  t.ok(
    outage.every((p) => /ERR_CONNECTION_REFUSED|Failed to load resource|net::|fetch/i.test(p)),
    "only refused connections during the outage",
  );
});

t.test("a preference saved in <notify-preferences> holds back the next notification", async (t) => {
  const inApp = preferences.locator('input[data-channel="in_app"]');
  t.ok(await inApp.isChecked(), "the in-app inbox is on");
  const locked = preferences.locator('[part~="option-locked"]');
  for (const option of await locked.all()) {
    const name = (await option.locator('[part~="option-label"]').textContent())?.trim();
    t.ok(await option.locator("input").isDisabled(), `${name}: locked, disabled`);
    t.match(await option.textContent(), /Always sent/, "with the reason");
  }
  await inApp.uncheck();
  const patched = page.waitForRequest((r) => r.method() === "PATCH" && r.url().endsWith("/inbox/preferences"));
  await preferences.locator('[part~="save"]').click();
  await preferences.getByText("Your preferences are saved.").waitFor({ timeout: 10_000 });
  t.same(
    (await patched).postDataJSON(),
    { channel_optout: ["in_app"] },
    "only what the user changed is sent: no time zone guessed from the browser, nothing else overwritten",
  );
  const stored = await inboxApi("/inbox/preferences");
  t.same(stored.channel_optout, ["in_app"], "stored: the user opted out of the in-app channel");
  t.equal(stored.time_zone, null, "the user's time zone is left unset");

  const held = `held-${randomUUID().slice(0, 8)}`;
  const heldId = await send(held, ["in_app", "email"]);
  const status = await eventually(
    async () => {
      const s = await channelStatus(heldId, "in_app");
      return s?.status === "suppressed" ? s : undefined;
    },
    30_000,
    "the in-app channel suppressed",
  );
  t.equal(status.reason, "opted_out");
  await eventually(
    async () => ((await channelStatus(heldId, "email"))?.status === "delivered" ? true : undefined),
    30_000,
    "the email delivered",
  );

  // Back on; the next one arrives, and the one held back never does.
  await inApp.check();
  await preferences.locator('[part~="save"]').click();
  await preferences.getByText("Your preferences are saved.").waitFor({ timeout: 10_000 });
  const next = `next-${randomUUID().slice(0, 8)}`;
  await send(next);
  // The clicks in the form closed the panel (a click elsewhere does).
  await openPanel();
  await itemWith(next).waitFor({ timeout: 15_000 });
  t.equal(await itemWith(held).count(), 0, "the notification sent while opted out is not in the inbox");
});

t.test("keyboard alone: Tab to the bell, Enter opens, arrows and Tab move, Escape closes", async (t) => {
  await page.goto(demoUrl);
  await inbox.locator('[part~="bell"]').waitFor();
  await page.evaluate("document.activeElement && document.activeElement.blur()");
  let presses = 0;
  while ((await focused()) !== "bell" && presses < 30) {
    await page.keyboard.press("Tab");
    presses++;
  }
  t.equal(await focused(), "bell", `Tab reaches the bell (${presses} presses)`);
  await page.keyboard.press("Enter");
  t.equal(await bell.getAttribute("aria-expanded"), "true", "Enter opens the panel");
  await items.first().waitFor();
  t.match(await focused(), /^item /, "focus moves into the panel, on the newest item");
  const count = await items.count();
  t.ok(count >= 3, `items to move through (${count})`);
  await page.keyboard.press("ArrowDown");
  t.equal(
    await page.evaluate(`(() => {
      let at = document.activeElement;
      while (at && at.shadowRoot && at.shadowRoot.activeElement) at = at.shadowRoot.activeElement;
      return at.getAttribute("aria-posinset");
    })()`),
    "2",
    "ArrowDown moves to the next item",
  );
  await page.keyboard.press("ArrowUp");
  await page.keyboard.press("Tab");
  t.match(await focused(), /^action action-(read|unread)$/, "Tab goes to the item's first action");
  await page.keyboard.press("Tab");
  t.match(await focused(), /^action action-archive$/, "then its second");
  await page.keyboard.press("Tab");
  t.match(await focused(), /^item /, "then the next item");
  await page.keyboard.press("Enter");
  t.match(
    await page.getByTestId("routed").textContent(),
    /Acme would open Welcome/,
    "Enter on an item reaches the product's item-click handler",
  );
  await page.keyboard.press("Escape");
  t.equal(await bell.getAttribute("aria-expanded"), "false", "Escape closes the panel");
  t.ok(await panel.isHidden());
  t.equal(await focused(), "bell", "focus is back on the bell");
});

t.test("locale=de speaks German; the strings property replaces a text", async (t) => {
  await page.evaluate(`document.querySelector("notify-inbox").setAttribute("locale", "de")`);
  await eventually(
    async () => (/^Benachrichtigungen/.test((await bell.getAttribute("aria-label")) ?? "") ? true : undefined),
    5000,
    "the German name",
  );
  await openPanel();
  t.match(await inbox.locator('[part~="heading"]').textContent(), "Benachrichtigungen");
  t.match(await inbox.locator('[part~="item-time"]').first().textContent(), /jetzt|Sekunde|Minute/, "German times");
  await page.evaluate(`document.querySelector("notify-inbox").strings = { panelTitle: "Aktivität" }`);
  await eventually(
    async () => ((await inbox.locator('[part~="heading"]').textContent())?.includes("Aktivität") ? true : undefined),
    5000,
    "the caller's title",
  );
  t.pass("the caller's text replaces the table's");
  await page.evaluate(`(() => {
    const inbox = document.querySelector("notify-inbox");
    inbox.removeAttribute("locale");
    inbox.strings = undefined;
  })()`);
});

t.test("the feed pages in as it scrolls, and Mark all as read clears the badge", async (t) => {
  const total = ((await inboxApi("/inbox?limit=100")).data as unknown[]).length;
  const pages: string[] = [];
  const onRequest = (request: { url(): string }) => {
    if (/\/api\/v1\/inbox\?.*cursor=/.test(request.url())) pages.push(request.url());
  };
  page.on("request", onRequest);
  t.teardown(() => page.off("request", onRequest));
  // Two items a page: the rest come as the end of the feed scrolls into view.
  await page.evaluate(`document.querySelector("notify-inbox").pageSize = 2`);
  await openPanel();
  await eventually(
    async () => {
      await items.last().scrollIntoViewIfNeeded();
      return (await items.count()) === total ? true : undefined;
    },
    30_000,
    `all ${total} items in the feed`,
  );
  t.ok(pages.length >= Math.ceil(total / 2) - 1, `the next pages were read by cursor (${pages.length} reads)`);
  t.equal((await items.count()) - new Set(await items.allTextContents()).size, 0, "no item twice");

  const unread = Number(await badge.textContent());
  t.ok(unread > 0, `${unread} unread before`);
  await inbox.locator('[part~="action-mark-all-read"]').click();
  await badge.waitFor({ state: "detached", timeout: 10_000 });
  t.equal(await inbox.locator('[part~="item-unread"]').count(), 0, "every item shows read");
  const counts = await eventually(
    async () => {
      const c = await inboxApi("/inbox/counts");
      return c.unread === 0 ? c : undefined;
    },
    10_000,
    "the server's count",
  );
  t.equal(counts.unread, 0, "the server agrees");
});

t.test("axe-core finds nothing in either element, open or closed, in both themes", async (t) => {
  // A feed as a newcomer's would look: what the tests sent archived, three new ones, one read.
  await inboxApi("/inbox/mark-all", { action: "archived" });
  for (const name of ["Ada", "Grace", "Linus"]) {
    await send(name);
    await itemWith(`Hello ${name},`).waitFor({ timeout: 15_000 });
  }
  await itemWith("Hello Ada,").locator('[part~="action-read"]').click();
  await eventually(async () => ((await badge.textContent()) === "2" ? true : undefined), 10_000, "badge 2");
  for (const theme of ["light", "midnight"]) {
    await page.goto(theme === "light" ? demoUrl : `${demoUrl}?theme=midnight`);
    await preferences.locator('[part~="save"]').waitFor();
    await inbox.locator('[part~="bell"]').waitFor();
    const closed = await runAxe(page);
    t.same(closed.violations, [], `${theme}: closed`);
    t.ok(closed.inbox.includes("button-name"), "the bell was checked, inside its shadow root");
    t.ok(closed.preferences.includes("label"), "the form's fields were checked, inside its shadow root");
    await openPanel();
    await items.first().waitFor();
    await live();
    const open = await runAxe(page);
    t.same(open.violations, [], `${theme}: open, with items`);
    t.ok(open.inbox.includes("color-contrast"), "the panel's colours were checked");
    await shoot(theme === "light" ? "inbox" : "inbox-midnight");
    await page.keyboard.press("Escape");
    const form = theme === "light" ? "inbox-preferences" : "inbox-preferences-midnight";
    await preferences.screenshot({ path: join(shots, `${form}.png`) });
  }
});

t.test("no page request carried the API key, and the page raised no error", async (t) => {
  t.notOk(
    sentHeaders.some((line) => line.includes(apiKey)),
    "the key never left the demo's server",
  );
  // A stream the page closes itself (it navigates, or the feed starts over for another page size) is aborted.
  const closedByThePage = (problem: string) => /\/api\/v1\/inbox\/stream net::ERR_ABORTED$/.test(problem);
  t.same(
    problems.filter((problem) => !closedByThePage(problem)),
    [],
    "no console error, page error or failed request",
  );
});
