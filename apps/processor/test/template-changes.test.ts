import { announceTemplateChanged } from "@notify/bus";
import { eventually } from "@notify/testing";
import t from "tap";
import { laneDeps } from "../src/consumers.js";
import { processorFixture } from "./helpers.js";

// A render that names no version uses the template's latest, cached for seconds; a version
// written on any ingest instance is announced on NATS, and the processor reads the latest again
// at once instead of after its cache TTL.
const { database, bus, deps } = await processorFixture(t);
const lane = await laneDeps(deps, "transactional");
const request = { templateId: "promo", version: null, locale: null, channel: "sms" as const, data: { name: "Ada" } };

async function writeVersion2() {
  await database.sql.begin(async (tx) => {
    await tx`insert into template_versions (template_id, version, params) values ('promo', 2, '["name"]')`;
    await tx`insert into template_variants (template_id, version, channel, locale, subject, body_template)
             values ('promo', 2, 'sms', 'en', null, 'New deal for <%= it.name %>')`;
    await tx`update templates set latest_version = 2 where id = 'promo'`;
  });
}

t.test("an announced template version is rendered next, not after the cache TTL", async (t) => {
  t.match(await lane.render(request), { ok: true, version: 1, body: "Deal for Ada" });
  await writeVersion2();
  t.match(await lane.render(request), { ok: true, version: 1 }, "cached: nothing told the processor yet");
  t.ok(await announceTemplateChanged(bus, { template_id: "promo" }));
  await eventually(
    async () => {
      const outcome = await lane.render(request);
      return outcome.ok && outcome.version === 2 ? outcome : undefined;
    },
    2000,
    "version 2 is rendered",
  );
  t.match(
    await lane.render({ ...request, version: 1 }),
    { ok: true, body: "Deal for Ada" },
    "a pinned version is kept",
  );
});
