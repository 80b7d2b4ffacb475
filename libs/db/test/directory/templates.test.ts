import { freshDatabase } from "@notify/testing";
import t from "tap";
import type { TemplateContent } from "../../src/directory/templates.js";
import {
  listTemplateSummaries,
  readLatestTemplateParams,
  readTemplateVersion,
  writeTemplateVersion,
} from "../../src/index.js";

// Template versions are immutable: a write adds a version unless the caller finds the latest
// equal, and concurrent writers get consecutive versions.
const { database } = await freshDatabase(t);

const content = (body: string): TemplateContent => ({
  default_locale: "en",
  params: ["name"],
  ttl_seconds: null,
  variants: [
    { channel: "email", locale: "en", subject: "Hi", body_template: body },
    { channel: "in_app", locale: "en", subject: null, body_template: body },
  ],
});

t.test("created, unchanged, versioned", async (t) => {
  const never = () => false;
  const created = await writeTemplateVersion(database, "welcome", content("Hello <%= it.name %>"), never);
  t.equal(created.kind, "created");
  t.equal(created.template.version, 1);
  t.equal(created.template.variants.length, 2);

  let compared: unknown = null;
  const same = await writeTemplateVersion(database, "welcome", content("ignored"), (latest) => {
    compared = latest.version;
    return true;
  });
  t.equal(same.kind, "unchanged");
  t.equal(compared, 1, "compared with the latest version");
  t.equal(same.template.version, 1);

  const next = await writeTemplateVersion(database, "welcome", content("Hi again"), never);
  t.equal(next.kind, "versioned");
  t.equal(next.template.version, 2);
  t.equal(next.template.latest_version, 2);

  const v1 = await readTemplateVersion(database, "welcome", 1);
  t.equal(v1?.variants.find((v) => v.channel === "email")?.body_template, "Hello <%= it.name %>", "v1 is unchanged");
  t.equal(v1?.latest_version, 2);
  t.equal((await readTemplateVersion(database, "welcome", null))?.version, 2, "null reads the latest");
  t.equal(await readTemplateVersion(database, "welcome", 3), null);
  t.equal(await readTemplateVersion(database, "missing", null), null);
  t.same(await readLatestTemplateParams(database, "welcome"), { version: 2, params: ["name"], ttl_seconds: null });
  t.equal(await readLatestTemplateParams(database, "missing"), null);
});

t.test("concurrent writers get consecutive versions", async (t) => {
  const results = await Promise.all(
    [1, 2, 3, 4].map((i) => writeTemplateVersion(database, "race", content(`body ${i}`), () => false)),
  );
  t.same(results.map((r) => r.template.version).sort(), [1, 2, 3, 4]);
  t.equal(results.filter((r) => r.kind === "created").length, 1, "one of them created the template");
});

t.test("the list pages by id and counts past the last page", async (t) => {
  const first = await listTemplateSummaries(database, { page: 1, pageSize: 1 });
  t.same(
    first.data.map((d) => d.template_id),
    ["race"],
  );
  t.equal(first.total_count, 2);
  const beyond = await listTemplateSummaries(database, { page: 5, pageSize: 1 });
  t.same(beyond.data, []);
  t.equal(beyond.total_count, 2);
});
