import { appendFileSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import t from "tap";
import { type JournalEntry, openJournal } from "../../src/sandboxes/journal.js";
import { tempDir } from "./receiver.js";

type Entry = JournalEntry & { n?: number };

t.test("creates the file and its folder, owner-only, and reads entries back in order", async (t) => {
  const path = join(tempDir(t), "nested", "deeper", "j.jsonl");
  const journal = openJournal<Entry>(path);
  t.same(journal.entries, []);
  journal.append({ type: "a", n: 1 });
  journal.append({ type: "b", n: 2 });
  t.equal(statSync(path).mode & 0o777, 0o600, "entries may carry personal data");
  t.equal(readFileSync(path, "utf8"), '{"type":"a","n":1}\n{"type":"b","n":2}\n', "one JSON object per line");
  t.same(openJournal<Entry>(path).entries, [
    { type: "a", n: 1 },
    { type: "b", n: 2 },
  ]);
});

t.test("a torn last line is dropped and cut off, so the next entry starts a line of its own", async (t) => {
  const path = join(tempDir(t), "j.jsonl");
  openJournal<Entry>(path).append({ type: "a", n: 1 });
  appendFileSync(path, '{"type":"b","n":');
  const journal = openJournal<Entry>(path);
  t.same(journal.entries, [{ type: "a", n: 1 }]);
  journal.append({ type: "c", n: 3 });
  t.same(openJournal<Entry>(path).entries, [
    { type: "a", n: 1 },
    { type: "c", n: 3 },
  ]);
  t.equal(readFileSync(path, "utf8"), '{"type":"a","n":1}\n{"type":"c","n":3}\n');
});

t.test("a last entry written whole but for its newline is kept", async (t) => {
  const path = join(tempDir(t), "j.jsonl");
  writeFileSync(path, '{"type":"a","n":1}\n{"type":"b","n":2}');
  const journal = openJournal<Entry>(path);
  t.same(journal.entries, [
    { type: "a", n: 1 },
    { type: "b", n: 2 },
  ]);
  journal.append({ type: "c" });
  t.same(
    openJournal<Entry>(path).entries.map((e) => e.type),
    ["a", "b", "c"],
  );
});

t.test("an unreadable line before the last is corruption, not a crash: the open fails", async (t) => {
  const path = join(tempDir(t), "j.jsonl");
  writeFileSync(path, '{"type":"a"}\nnot json\n{"type":"c"}\n');
  t.throws(() => openJournal(path), { message: /j\.jsonl:2 is not a journal entry/ });
  writeFileSync(path, '{"type":"a"}\n["no type"]\n');
  t.throws(() => openJournal(path), { message: /:2 is not a journal entry/ });
});

t.test("blank lines are skipped", async (t) => {
  const path = join(tempDir(t), "j.jsonl");
  writeFileSync(path, '\n{"type":"a"}\n\n');
  t.same(openJournal(path).entries, [{ type: "a" }]);
});
