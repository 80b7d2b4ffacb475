import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AudienceRecord } from "@notify/db";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import { runCli } from "./support.js";

const { database } = await freshDatabase(t);
const dir = mkdtempSync(join(tmpdir(), "notify-audiences-"));

const notify = (argv: string[]) => runCli(argv, { database });

t.test("notify audiences create, import (NDJSON and CSV) and show", async (t) => {
  const created = await notify(["audiences", "create", "--name", "beta testers", "--json"]);
  t.equal(created.code, 0, created.stderr);
  const audience = JSON.parse(created.stdout) as AudienceRecord;

  const ndjson = join(dir, "members.ndjson");
  writeFileSync(ndjson, Array.from({ length: 12_345 }, (_, i) => JSON.stringify(`user-${i}`)).join("\n"));
  const imported = await notify(["audiences", "import", audience.id, ndjson, "--json"]);
  t.equal(imported.code, 0, imported.stderr);
  t.same(JSON.parse(imported.stdout), {
    audience_id: audience.id,
    received: 12_345,
    added: 12_345,
    member_count: 12_345,
  });

  const csv = join(dir, "more.csv");
  writeFileSync(csv, "user_id\nuser-1\nuser-new\n");
  const more = await notify(["audiences", "import", audience.id, csv]);
  t.equal(more.code, 0, more.stderr);
  t.match(more.stdout, "imported 2 lines: 1 new members, 12346 in all");

  const bad = join(dir, "bad.txt");
  writeFileSync(bad, "ok\nnot ok\n");
  const refused = await notify(["audiences", "import", audience.id, bad, "--format", "csv"]);
  t.equal(refused.code, 1);
  t.match(refused.stderr, "line 2:");
  t.equal((await notify(["audiences", "import", audience.id, bad])).code, 2, "the format is needed");
  t.equal((await notify(["audiences", "import", "nope", csv])).code, 1);

  const shown = await notify(["audiences", "show", audience.id]);
  t.match(shown.stdout, /members\s+12346/);
});
