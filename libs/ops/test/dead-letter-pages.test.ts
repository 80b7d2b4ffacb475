import { setTimeout as sleep } from "node:timers/promises";
import { type StoredLetter, subjectName } from "@notify/bus";
import { CHANNELS, type Channel, DEAD_LETTER_CLASSES, type DeadLetter, type DeadLetterClass } from "@notify/core";
import { freshBus } from "@notify/testing";
import fc from "fast-check";
import t from "tap";
import { type DeadLetterFilters, matchesEveryFilter, pageDeadLetters, readDeadLetters } from "../src/index.js";

// Pages of the dead letters (GET /api/v1/dead-letters) against a stream of letters on every
// channel, in three spells of time, with poison messages between them (sequences no letter
// has): every page is the slice of all the letters the filters select, newest first, and an
// unfiltered page reads the page, not the stream.
const bus = await freshBus(t, 1);
const SPELLS = 3;
const PER_SPELL = 80;

const letterOf = (i: number, channel: Channel, cls: DeadLetterClass): DeadLetter =>
  ({
    version: 1,
    class: cls,
    reason: `reason ${i}`,
    channel,
    lane: "transactional",
    provider: "sandbox",
    attempts: 1,
    notification: null,
    item: { notification_id: `n-${i % 7}`, channel, priority: "transactional", user_id: `u-${i}` },
    history: [],
    dead_lettered_at: new Date().toISOString(),
  }) as unknown as DeadLetter;

const bounds: Date[] = [];
for (let spell = 0, i = 0; spell < SPELLS; spell++) {
  bounds.push(new Date());
  await sleep(5);
  for (let n = 0; n < PER_SPELL; n++, i++) {
    const channel = CHANNELS[(i * 7 + spell) % CHANNELS.length] as Channel;
    const cls = DEAD_LETTER_CLASSES[i % DEAD_LETTER_CLASSES.length] as DeadLetterClass;
    await bus.publish(bus.subjects.dlq(channel), letterOf(i, channel, cls), `letter-${i}`);
    if (i % 9 === 0) await bus.js.publish(subjectName(bus.naming, "notify.dlq.poison.X"), "raw");
  }
  await sleep(5);
}
bounds.push(new Date());
const all = await readDeadLetters(bus, {});

const expected = (filters: DeadLetterFilters, offset: number, limit: number) => {
  const selected = all.filter((l) => matchesEveryFilter(l, filters)).reverse();
  return { seqs: selected.slice(offset, offset + limit).map((l) => l.seq), total: selected.length };
};
const seqs = (letters: StoredLetter[]) => letters.map((l) => l.seq);

t.test("the letters are there, with sequences no letter has between them", async (t) => {
  t.equal(all.length, SPELLS * PER_SPELL);
  const info = await bus.jsm.streams.info(bus.streams.dlq);
  t.ok(info.state.last_seq > all.length, "poison messages in between");
});

t.test("every page is the slice of the selected letters, newest first, with their count", async (t) => {
  const instant = fc.constantFrom(...bounds, ...all.filter((_, i) => i % 37 === 0).map((l) => l.time));
  // A filter on what the letters say in one run of four: the others read only the page.
  const sometimes = <T>(arbitrary: fc.Arbitrary<T>, absent: number) =>
    fc.oneof({ arbitrary: fc.constant(undefined), weight: absent }, { arbitrary, weight: 1 });
  const filtersOf = fc
    .record({
      channel: sometimes(fc.constantFrom(...CHANNELS), 1),
      class: sometimes(fc.constantFrom(...DEAD_LETTER_CLASSES), 6),
      notification: sometimes(fc.constantFrom("n-1", "n-3", "n-none"), 6),
      since: sometimes(instant, 1),
      until: sometimes(instant, 1),
    })
    .map((r) => Object.fromEntries(Object.entries(r).filter(([, v]) => v !== undefined)) as DeadLetterFilters);
  await fc.assert(
    fc.asyncProperty(
      filtersOf,
      fc.nat({ max: 90 }),
      fc.integer({ min: 1, max: 40 }),
      async (filters, offset, limit) => {
        const page = await pageDeadLetters(bus, filters, { offset, limit });
        const want = expected(filters, offset, limit);
        return page.total === want.total && JSON.stringify(seqs(page.letters)) === JSON.stringify(want.seqs);
      },
    ),
    { numRuns: 80 },
  );
  t.pass("pages match");
});

t.test("the last page, a page past the end and an empty window", async (t) => {
  const last = await pageDeadLetters(bus, {}, { offset: all.length - 3, limit: 10 });
  t.same(seqs(last.letters), expected({}, all.length - 3, 10).seqs, "the three oldest");
  t.same(await pageDeadLetters(bus, {}, { offset: all.length, limit: 10 }), { letters: [], total: all.length });
  const future = await pageDeadLetters(bus, { since: new Date(Date.now() + 60_000) }, { offset: 0, limit: 10 });
  t.same(future, { letters: [], total: 0 }, "nothing after now");
});

t.test("a page of the newest letters reads the page, not the stream", async (t) => {
  const before = bus.nc.stats().inMsgs;
  const page = await pageDeadLetters(bus, {}, { offset: 20, limit: 5 });
  const read = bus.nc.stats().inMsgs - before;
  t.same(seqs(page.letters), expected({}, 20, 5).seqs);
  // The counts' answers (two each, about log2 of the stream's length of them) and the five.
  t.ok(read < 80, `${read} messages received for a page of 5 of ${all.length}`);
});

t.test("reading leaves no consumer behind on the stream", async (t) => {
  // An ordered consumer left to expire lingers five minutes: a busy list would pile them up
  // until the stream's consumer limit refuses every reader.
  await pageDeadLetters(bus, {}, { offset: 20, limit: 5 });
  await pageDeadLetters(bus, { class: "permanent" }, { offset: 0, limit: 5 });
  await readDeadLetters(bus, {});
  let left = -1;
  for (let tries = 0; tries < 50 && left !== 0; tries++) {
    left = (await bus.jsm.streams.info(bus.streams.dlq)).state.consumer_count;
    if (left !== 0) await sleep(20);
  }
  t.equal(left, 0, "every reader's consumer is deleted once it is done");
});
