import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { addSuppressions, type SuppressionEntry } from "@notify/db";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import { runCli } from "./support.js";

// `notify suppressions`: entries added and removed by hand, the list exported to CSV and read
// back, against a fresh database.
const { database } = await freshDatabase(t);
const dir = mkdtempSync(join(tmpdir(), "notify-suppressions-"));

const notify = (argv: string[]) => runCli(argv, { database });
const HEADER = "channel,address,scope,client_id,reason,created_at,note";

/** Every entry, as the columns an import restores (created_at is the import's). */
async function everyEntry() {
  const rows = await database.sql<SuppressionEntry[]>`
    select channel, address, client_id, reason, source from suppressions order by channel, address, client_id`;
  return rows.map((r) => ({ ...r, source: { note: r.source.note } }));
}

t.test("add, list and remove: addresses normalised, the first entry kept, scope required", async (t) => {
  const added = await notify([
    "suppressions",
    "add",
    "email",
    " Ada@Example.COM ",
    "--client",
    "shop",
    "--note",
    "asked by phone",
  ]);
  t.equal(added.code, 0, added.stderr);
  t.match(added.stdout, /email\s+ada@example\.com\s+shop\s+manual\s+cli\s+\S+\s+asked by phone/);
  t.match(added.stderr, "added");
  const again = await notify([
    "suppressions",
    "add",
    "email",
    "ada@example.com",
    "--client",
    "shop",
    "--reason",
    "unsubscribe",
    "--json",
  ]);
  t.equal(again.code, 0, again.stderr);
  t.match(
    JSON.parse(again.stdout),
    { added: false, entry: { reason: "manual", client_id: "shop" } },
    "the first is kept",
  );
  t.match(again.stderr, "on the list already");
  t.equal(
    (await notify(["suppressions", "add", "sms", "+1 (415) 555-0100", "--all", "--reason", "carrier_opt_out"])).code,
    0,
  );

  const all = await notify(["suppressions", "list"]);
  t.match(all.stdout, /sms\s+\+14155550100\s+all clients\s+carrier_opt_out/);
  t.match(all.stdout, "ada@example.com");
  const blog = await notify(["suppressions", "list", "--client", "blog"]);
  t.notMatch(blog.stdout, "ada@example.com", "a client's entry is not another's");
  t.match(blog.stdout, "+14155550100", "an entry for every client holds for each");
  const sms = await notify(["suppressions", "list", "--channel", "sms", "--json"]);
  t.same(
    (JSON.parse(sms.stdout) as { data: SuppressionEntry[] }).data.map((e) => e.address),
    ["+14155550100"],
  );
  t.match(
    (await notify(["suppressions", "list", "--address", "ADA@"])).stdout,
    "ada@example.com",
    "a prefix, normalised",
  );

  for (const [argv, message] of [
    [["add", "email", "ada@example.com"], "give --client CLIENT"],
    [["add", "email", "ada@example.com", "--client", "shop", "--all"], "give --client CLIENT"],
    [["add", "email", "not an address", "--all"], "is not an email address"],
    [["add", "push", "x", "--all"], 'channel "push" is none of email, sms'],
    [["add", "sms", "12", "--all"], "is not a phone number"],
    [["add", "email", "a@b.c", "--all", "--reason", "bored"], "--reason must be one of"],
    [["list", "--client", "bad client"], "--client must be"],
    [["add", "email", "a@b.c", "--all", "--note", "two\nlines"], "--note must not contain control characters"],
  ] as const) {
    const refused = await notify(["suppressions", ...argv]);
    t.equal(refused.code, 2, argv.join(" "));
    t.match(refused.stderr, message);
  }

  const removed = await notify(["suppressions", "remove", "email", "ADA@example.com", "--client", "shop"]);
  t.equal(removed.code, 0, removed.stderr);
  t.match(removed.stdout, "removed email ada@example.com from client shop's list");
  const gone = await notify(["suppressions", "remove", "email", "ada@example.com", "--client", "shop"]);
  t.equal(gone.code, 1);
  t.match(gone.stderr, "is not on client shop's list");
  const notTheirs = await notify(["suppressions", "remove", "sms", "+14155550100", "--client", "shop"]);
  t.equal(notTheirs.code, 1, "a client's scope does not lift an entry for every client");
  // A removal's note, checked by the API's rule before anything is removed.
  for (const [note, message] of [
    ["x".repeat(501), "--note is longer than 500 characters"],
    ["two\nlines", "--note must not contain control characters"],
  ] as const) {
    const refused = await notify(["suppressions", "remove", "sms", "+14155550100", "--all", "--note", note]);
    t.equal(refused.code, 2);
    t.match(refused.stderr, message);
  }
  t.equal((await everyEntry()).length, 1, "a refused note removes nothing");
  const noted = await notify([
    "suppressions",
    "remove",
    "sms",
    "+14155550100",
    "--all",
    "--note",
    " STOP sent by mistake ",
  ]);
  t.equal(noted.code, 0, noted.stderr);
  t.match(noted.stdout, "removed sms +14155550100 from every client's list (note: STOP sent by mistake)");
  t.same(await everyEntry(), []);
});

t.test("export then import: the same list back, quoted and guarded in between", async (t) => {
  await database.sql`delete from suppressions`;
  const tricky = [
    { channel: "email", address: "=cmd|'/c+calc'!a0@example.com", client_id: "shop", note: '=HYPERLINK("http://x")' },
    { channel: "email", address: "bob@example.com", client_id: "", note: 'a "quoted", comma' },
    { channel: "email", address: "@lead@example.com", client_id: "blog", note: "-1+2" },
    { channel: "sms", address: "+14155550101", client_id: "", note: "" },
  ] as const;
  await addSuppressions(
    database,
    tricky.map((e) => ({ ...e, reason: "manual" as const, source: e.note === "" ? {} : { note: e.note } })),
  );
  // More than a page of the export (500) and a batch of the import (5000).
  await addSuppressions(
    database,
    Array.from({ length: 12_000 }, (_, i) => ({
      channel: "email" as const,
      address: `user${i}@example.com`,
      client_id: i % 2 ? "shop" : "",
      reason: "hard_bounce" as const,
      source: { provider: "sendgrid" },
    })),
  );
  const before = await everyEntry();
  t.equal(before.length, 12_004);

  const file = join(dir, "list.csv");
  const exported = await notify(["suppressions", "export", "--all", "--out", file]);
  t.equal(exported.code, 0, exported.stderr);
  t.match(exported.stderr, `exported 12004 entries to ${file}`);
  const csv = readFileSync(file, "utf8");
  const lines = csv.split("\r\n");
  t.equal(lines[0], HEADER);
  t.ok(csv.includes(`"'=HYPERLINK(""http://x"")"`), "a formula note: guarded, quoted, quotes doubled");
  t.ok(csv.includes(`email,'=cmd|'/c+calc'!a0@example.com,client,shop,`), "a formula address: guarded");
  t.ok(csv.includes(`'@lead@example.com,client,blog,manual,`), "@ guarded");
  t.ok(csv.includes(",'-1+2\r\n"), "- guarded");
  t.ok(csv.includes("sms,'+14155550101,all_clients,,manual,"), "a phone number's + guarded too");
  t.ok(csv.includes(`,"a ""quoted"", comma"\r\n`), "RFC 4180 quoting");
  t.notOk(
    lines.some((line) => /(^|,)[=+\-@]/.test(line)),
    "no cell starts a formula",
  );

  await database.sql`delete from suppressions`;
  const imported = await notify(["suppressions", "import", file]);
  t.equal(imported.code, 0, imported.stderr);
  t.match(imported.stdout, "read 12004 records: 12004 added, 0 on the list already, 0 refused");
  t.same(
    await everyEntry(),
    before.map((e) => ({ ...e, source: { note: e.source.note } })),
    "the same list back",
  );

  const again = await notify(["suppressions", "import", file, "--json"]);
  t.same(JSON.parse(again.stdout), { read: 12_004, added: 0, existing: 12_004, invalid: 0 });

  const stdout = await notify([
    "suppressions",
    "export",
    "--client",
    "blog",
    "--channel",
    "email",
    "--reason",
    "manual",
  ]);
  t.equal(stdout.code, 0, stdout.stderr);
  const records = stdout.stdout.split("\r\n");
  t.equal(records.length, 4, "on stdout: the header, blog's entry and the one for every client, and the last CRLF");
  t.ok(records.some((r) => r.startsWith("email,'@lead@example.com,client,blog,manual,")));
  t.ok(records.some((r) => r.startsWith("email,bob@example.com,all_clients,,manual,")));
});

t.test("import: a bad record is reported by line number and skipped, the good ones added", async (t) => {
  await database.sql`delete from suppressions`;
  const file = join(dir, "mixed.csv");
  writeFileSync(
    file,
    [
      "channel,address,scope,client_id,reason,note",
      "email,one@example.com,client,shop,manual,ok",
      'email,"two@example.com"x,client,shop,manual,',
      "email,not-an-address,client,shop,manual,",
      "fax,+14155550100,client,shop,manual,",
      "email,three@example.com,client,shop,bored,",
      "email,four@example.com,client,shop",
      "email,five@example.com,,,,",
      "email,six@example.com,all_clients,,spam_complaint,",
      "email,six@example.com,all_clients,,unsubscribe,",
      'email,seven"@example.com,client,shop,manual,',
      "sms,+1 415 555 0102,client,shop,,",
      "email,eight@example.com,client,bad client,,",
      'email,nine@example.com,client,shop,,"two\nlines"',
      "",
    ].join("\n"),
  );
  const imported = await notify(["suppressions", "import", file]);
  t.equal(imported.code, 1, "some records were refused");
  t.match(imported.stdout, "read 13 records: 3 added, 1 on the list already, 9 refused");
  for (const expected of [
    "line 3: text after a closing quote (skipped)",
    'line 4: "not-an-address" is not an email address',
    'line 5: channel "fax" is none of email, sms',
    "line 6: reason must be one of",
    "line 7: 4 fields where the header has 6",
    "line 8: no client_id",
    "line 11: a quote inside an unquoted field",
    "line 13: client_id must be",
    "lines 14-15: note must not contain control characters",
  ]) {
    t.match(imported.stderr, expected);
  }
  t.match(imported.stderr, "9 record(s) refused");
  t.same(
    (await everyEntry()).map((e) => [e.channel, e.address, e.client_id, e.reason]),
    [
      ["email", "one@example.com", "shop", "manual"],
      ["email", "six@example.com", "", "spam_complaint"],
      ["sms", "+14155550102", "shop", "manual"],
    ],
  );
});

t.test("import --client and --reason; a file that is not a suppression CSV adds nothing", async (t) => {
  await database.sql`delete from suppressions`;
  const file = join(dir, "plain.csv");
  writeFileSync(file, "\uFEFFaddress,channel\r\nA@example.com,email\r\n+14155550103,sms\r\n");
  const refused = await notify(["suppressions", "import", file]);
  t.equal(refused.code, 1, "without --client a record names no client");
  t.match(refused.stderr, "line 2: no client_id");
  const imported = await notify(["suppressions", "import", file, "--client", "shop", "--reason", "unsubscribe"]);
  t.equal(imported.code, 0, imported.stderr);
  t.same(
    (await everyEntry()).map((e) => [e.channel, e.address, e.client_id, e.reason]),
    [
      ["email", "a@example.com", "shop", "unsubscribe"],
      ["sms", "+14155550103", "shop", "unsubscribe"],
    ],
  );

  await database.sql`delete from suppressions`;
  for (const [text, message] of [
    ["email,a@example.com\n", 'the header\'s column "email" is none of'],
    ["channel,recipient\n", 'the header\'s column "recipient" is none of'],
    ["channel,note\nemail,x\n", "has no address column"],
    ["channel,address,channel\n", "names channel twice"],
    ['"channel,address\nemail,a@example.com\n', "line 1: unterminated quoted field"],
  ] as const) {
    writeFileSync(file, text);
    const run = await notify(["suppressions", "import", file, "--client", "shop"]);
    t.equal(run.code, 1, text);
    t.match(run.stderr, message);
  }
  t.same(await everyEntry(), [], "nothing added");
  const missing = await notify(["suppressions", "import", join(dir, "missing.csv")]);
  t.equal(missing.code, 1);
  t.match(missing.stderr, "ENOENT");
});

t.test("the usage text lists the suppressions commands", async (t) => {
  const help = await notify(["help"]);
  t.match(help.stdout, "notify suppressions export [--client CLIENT | --all]");
  t.match(help.stdout, "notify suppressions import FILE");
});
