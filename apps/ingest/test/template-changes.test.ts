import { onTemplateChanged } from "@notify/bus";
import { seedApiKey } from "@notify/db";
import { eventually } from "@notify/testing";
import t from "tap";
import { createTemplateLookup } from "../src/notifications/templates.js";
import { ingestApp, otherConnection } from "./support.js";

// Several ingest instances, each caching template parameters for a minute: a template created or
// given a version through one of them is what the next POST to any of them checks and pins, at
// once, because the change is announced on NATS; the cache TTL only bounds a missed announcement.
const CACHE_MS = 60_000;
const { database } = await ingestApp(t);
const cachedHere = createTemplateLookup(database, CACHE_MS);
const a = await ingestApp(t, { database, templates: cachedHere });
const { bus } = a;
const admin = await seedApiKey(database, { clientId: "ops", name: "admin", scopes: ["operator"] });

/** Another ingest instance: its own NATS connection and template cache. */
async function otherInstance() {
  const lookup = createTemplateLookup(database, CACHE_MS);
  onTemplateChanged(await otherConnection(t, bus), (event) => lookup.forget(event.template_id));
  return lookup;
}

const put = (id: string, params: string[]) =>
  a.app.request(`/api/v1/templates/${id}`, {
    method: "PUT",
    headers: { "x-api-key": admin, "content-type": "application/json" },
    body: JSON.stringify({
      default_locale: "en",
      params,
      variants: [{ channel: "sms", locale: "en", body_template: params.map((p) => `<%= it.${p} %>`).join(" ") }],
    }),
  });

t.test("a template created through one instance is known to another at once, not after the TTL", async (t) => {
  const b = await otherInstance();
  t.equal(await b("welcome"), null, "b looked it up before it existed, and caches that for a minute");
  t.equal((await put("welcome", ["name"])).status, 201);
  await eventually(async () => ((await b("welcome")) !== null ? true : undefined), 2000, "b knows the template");
});

t.test("a new version is what every instance checks and pins next", async (t) => {
  const b = await otherInstance();
  t.equal((await put("reset", ["code"])).status, 201);
  t.match(await b("reset"), { version: 1, params: ["code"] });
  t.match(await cachedHere("reset"), { version: 1 }, "the writing instance caches it too");
  t.equal((await put("reset", ["code", "minutes"])).status, 201);
  t.match(await cachedHere("reset"), { version: 2, params: ["code", "minutes"] }, "the writer forgot its own copy");
  await eventually(
    async () => ((await b("reset"))?.version === 2 ? true : undefined),
    2000,
    "b checks data against version 2",
  );
  const accepted = await a.app.request("/api/v1/notifications", {
    method: "POST",
    headers: { "x-api-key": admin, "content-type": "application/json", "idempotency-key": crypto.randomUUID() },
    body: JSON.stringify({
      user_id: "u-1",
      category: "security",
      template_id: "reset",
      data: { code: "123456" },
      priority: "transactional",
    }),
  });
  t.equal(accepted.status, 400, "data missing the new parameter is refused right after the PUT");
  t.match(await accepted.json(), { code: "template_data_invalid", detail: /minutes/ });
});

t.test("repeating the latest content announces nothing and keeps every cache", async (t) => {
  const b = await otherInstance();
  t.equal((await put("same", ["x"])).status, 201);
  await eventually(async () => ((await b("same")) !== null ? true : undefined), 2000, "b knows it");
  let heard = 0;
  const stop = onTemplateChanged(bus, () => heard++);
  t.teardown(stop);
  await bus.nc.flush();
  t.equal((await put("same", ["x"])).status, 200);
  await bus.nc.flush();
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.equal(heard, 0);
});

t.test("without an announcement the cache holds: the announcement is what reached b", async (t) => {
  const b = await otherInstance();
  t.equal(await b("quiet"), null);
  t.equal((await put("quiet", ["x"])).status, 201);
  // A's own announcement has reached b by now; an instance that missed it keeps its copy until the TTL.
  const missed = createTemplateLookup(database, CACHE_MS);
  t.equal(await missed("quiet2"), null);
  await database.sql`insert into templates (id, default_locale, latest_version) values ('quiet2', 'en', 1)`;
  await database.sql`insert into template_versions (template_id, version, params) values ('quiet2', 1, '[]')`;
  t.equal(await missed("quiet2"), null, "still cached: nothing told it");
  missed.forget("quiet2");
  t.match(await missed("quiet2"), { version: 1 }, "forgotten, it is looked up again");
});

t.test("a malformed announcement is ignored", async (t) => {
  const b = await otherInstance();
  t.equal((await put("kept", ["x"])).status, 201);
  await eventually(async () => ((await b("kept")) !== null ? true : undefined), 2000, "b knows it");
  for (const junk of ["not json", "{}", '{"template_id": 5}', "null"])
    bus.nc.publish(`${bus.naming.namespace}.notify.events.templates`, junk);
  await bus.nc.flush();
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.match(await b("kept"), { version: 1 }, "still served");
});
