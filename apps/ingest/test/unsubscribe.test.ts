import { signUnsubscribeToken, unsubscribeKey } from "@notify/core";
import { loadUnsubscribeKey } from "@notify/db";
import t from "tap";
import { ingestApp } from "./support.js";

// One-click unsubscribe (RFC 8058) at /u/{token}: no API key, the token's MAC is the authority.
const { app, database } = await ingestApp(t);
const key = await loadUnsubscribeKey(database);
const tokenFor = (userId: string, category = "news") =>
  signUnsubscribeToken(key, { clientId: "shop", userId, category });

const preferencesOf = async (userId: string) =>
  (
    await database.sql<{ channel_optout: string[]; category_optout: string[]; locale: string | null }[]>`
      select channel_optout, category_optout, locale from user_preferences where user_id = ${userId}`
  )[0];

const oneClick = (token: string) =>
  app.request(`/u/${token}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: "List-Unsubscribe=One-Click",
  });

t.test("GET shows a confirmation page whose button posts back, and changes nothing", async (t) => {
  const response = await app.request(`/u/${tokenFor("page-user")}`, { headers: { accept: "text/html" } });
  t.equal(response.status, 200);
  t.match(response.headers.get("content-type"), /^text\/html/);
  const csp = response.headers.get("content-security-policy") ?? "";
  t.match(csp, /default-src 'none'/);
  t.match(csp, /form-action 'self'/);
  t.match(csp, /frame-ancestors 'none'/);
  t.notMatch(csp, /script-src|unsafe-inline/, "no script may run, no inline style but the hashed one");
  t.equal(response.headers.get("referrer-policy"), "no-referrer");
  t.equal(response.headers.get("cache-control"), "no-store");
  const page = await response.text();
  t.notMatch(page, /<script/i);
  t.match(page, /<html lang="en">/);
  t.match(
    page,
    /<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">/,
  );
  t.match(page, /<strong>news<\/strong>/);
  t.equal(await preferencesOf("page-user"), undefined, "nothing written");
});

t.test("POST opts the user out of the token's category, keeps the rest, and is idempotent", async (t) => {
  await database.sql`insert into user_preferences (user_id, channel_optout, category_optout, locale)
    values ('ada', ${["sms"]}, ${["digest"]}, 'fr')`;
  const first = await oneClick(tokenFor("ada"));
  t.equal(first.status, 200);
  t.match(await first.text(), /no longer receive <strong>news<\/strong> emails/);
  t.same(await preferencesOf("ada"), { channel_optout: ["sms"], category_optout: ["digest", "news"], locale: "fr" });
  const again = await oneClick(tokenFor("ada"));
  t.equal(again.status, 200, "a repeat answers the same");
  t.same((await preferencesOf("ada"))?.category_optout, ["digest", "news"], "and adds nothing");
});

t.test("POST for a user without preferences creates them with the one opt-out", async (t) => {
  t.equal((await oneClick(tokenFor("newcomer", "product.tips"))).status, 200);
  t.same(await preferencesOf("newcomer"), { channel_optout: [], category_optout: ["product.tips"], locale: null });
});

t.test("the page's form (multipart too, or no body at all) unsubscribes as the mail client's POST does", async (t) => {
  const form = new FormData();
  form.set("List-Unsubscribe", "One-Click");
  t.equal((await app.request(`/u/${tokenFor("form-user")}`, { method: "POST", body: form })).status, 200);
  t.same((await preferencesOf("form-user"))?.category_optout, ["news"]);
  t.equal((await app.request(`/u/${tokenFor("bare-user")}`, { method: "POST" })).status, 200);
  t.same((await preferencesOf("bare-user"))?.category_optout, ["news"]);
});

t.test("a tampered, foreign or malformed token is a 404 and writes nothing", async (t) => {
  const good = tokenFor("victim");
  const flipped = `${good.slice(0, 5)}${good[5] === "A" ? "B" : "A"}${good.slice(6)}`;
  const foreign = signUnsubscribeToken(unsubscribeKey("another deployment"), {
    clientId: "shop",
    userId: "victim",
    category: "news",
  });
  for (const token of [flipped, foreign, good.slice(0, -1), "not-a-token", "%3Cscript%3E"]) {
    const post = await oneClick(token);
    t.equal(post.status, 404, `POST ${token}`);
    t.match(post.headers.get("content-type"), /^application\/problem\+json/);
    t.match(await post.json(), { code: "not_found", status: 404 });
    const get = await app.request(`/u/${token}`);
    t.equal(get.status, 404, `GET ${token}`);
    await get.body?.cancel();
    const browser = await app.request(`/u/${token}`, { method: "POST", headers: { accept: "text/html,*/*" } });
    t.equal(browser.status, 404);
    t.match(browser.headers.get("content-type"), /^text\/html/);
    t.match(await browser.text(), /not valid\. Nothing was changed/);
  }
  t.equal(await preferencesOf("victim"), undefined, "nothing written for the user the token named");
  const [{ n } = { n: -1 }] = await database.sql<{ n: number }[]>`
    select count(*)::int as n from user_preferences where user_id = 'victim'`;
  t.equal(n, 0);
});
