import {
  cancelBroadcastExpansion,
  pauseBroadcastExpansion,
  readBroadcastProgress,
  resumeBroadcastExpansion,
} from "@notify/db";
import { captureLogger, freshBus, freshDatabase, streamCount } from "@notify/testing";
import t from "tap";
import { expandBatch, expandBroadcasts } from "../src/broadcasts/expander.js";

// Pause, resume and cancel (what POST /api/v1/broadcasts/{id}/pause|resume|cancel and the
// operator's /ops routes run) against the real expander: a paused broadcast takes no further
// batch, the batch in hand finishes, resume goes on from the stored cursor, cancel works from
// paused, and the counts stay exact throughout.
const { database } = await freshDatabase(t);
const bus = await freshBus(t);
const { log } = captureLogger("processor");
const deps = { database, bus, log };

async function broadcast(id: string, members: number, client = "shop") {
  await database.sql`insert into audiences (id, name) values (${id}, ${id})`;
  await database.sql`insert into audience_members (audience_id, user_id)
    select ${id}, ${`${id}-u`} || lpad(n::text, 6, '0') from generate_series(1, ${members}) n`;
  await database.sql`insert into broadcasts (id, client_id, dedup_key, request_hash, audience_id, category, template_id,
      template_version, requested_channels, data, status, total)
    values (${id}, ${client}, ${id}, 'h', ${id}, 'deals', 'promo', 1, null, '{}', 'expanding', ${members})`;
}

const state = async (id: string) =>
  (
    await database.sql<{ status: string; expanded: number; cursor: string | null; finished: boolean }[]>`
    select status, expanded::int as expanded, cursor, finished_at is not null as finished from broadcasts where id = ${id}`
  )[0];
const recipients = async (id: string) =>
  database.sql<
    { user_id: string }[]
  >`select user_id from broadcast_recipients where broadcast_id = ${id} order by user_id`;

t.test("a paused broadcast takes no further batch; resume goes on from the cursor", async (t) => {
  await broadcast("p1", 25);
  t.match(await expandBatch(deps, 10), { kind: "expanded", count: 10 });
  await pauseBroadcastExpansion(database, "shop", "p1");
  t.match(await state("p1"), { status: "paused", expanded: 10, cursor: "p1-u000010", finished: false });
  t.match(await expandBatch(deps, 10), { kind: "idle" }, "the expander finds nothing to expand");
  t.equal(await expandBroadcasts(deps, 10), 0, "nor does the pipelined loop");
  t.equal((await recipients("p1")).length, 10);
  t.match(await readBroadcastProgress(database, "p1"), { status: "paused", total: 25, expanded: 10 });

  await pauseBroadcastExpansion(database, "shop", "p1");
  t.match(await state("p1"), { status: "paused", expanded: 10 }, "pausing twice changes nothing");

  await resumeBroadcastExpansion(database, "shop", "p1");
  t.match(await state("p1"), { status: "expanding", expanded: 10, cursor: "p1-u000010" });
  t.equal(await expandBroadcasts(deps, 10), 15, "the other 15 members, none twice");
  const rows = await recipients("p1");
  t.equal(rows.length, 25);
  t.equal(new Set(rows.map((r) => r.user_id)).size, 25);
  t.match(await state("p1"), { status: "expanded", expanded: 25, finished: true });
  t.equal(await streamCount(bus, bus.streams.lane("promotional")), 25);

  await pauseBroadcastExpansion(database, null, "p1");
  await resumeBroadcastExpansion(database, null, "p1");
  t.match(await state("p1"), { status: "expanded", finished: true }, "a finished broadcast is left as it is");
});

t.test("another client's pause changes nothing; the operator's (any client) does", async (t) => {
  await broadcast("p2", 5, "bank");
  await pauseBroadcastExpansion(database, "shop", "p2");
  t.match(await state("p2"), { status: "expanding" });
  await pauseBroadcastExpansion(database, null, "p2");
  t.match(await state("p2"), { status: "paused" });
  await resumeBroadcastExpansion(database, "shop", "p2");
  t.match(await state("p2"), { status: "paused" }, "nor may it resume it");
  await cancelBroadcastExpansion(database, null, "p2");
  t.match(await state("p2"), { status: "cancelled", expanded: 0, finished: true }, "cancel works from paused");
  await resumeBroadcastExpansion(database, null, "p2");
  t.match(await state("p2"), { status: "cancelled" }, "a cancelled broadcast is not resumed");
  t.equal(await expandBroadcasts(deps, 10), 0);
  t.equal((await recipients("p2")).length, 0);
});

t.test("a pause while the expander runs lands between batches and leaves exact counts", async (t) => {
  await broadcast("p3", 2000);
  const running = expandBroadcasts(deps, 20);
  // Pause once some batches are in.
  for (;;) {
    const s = await state("p3");
    if ((s?.expanded ?? 0) >= 100) break;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await pauseBroadcastExpansion(database, "shop", "p3");
  const expandedByLoop = await running;
  const s = await state("p3");
  t.equal(s?.status, "paused");
  t.ok((s?.expanded ?? 0) < 2000, `stopped part-way (${s?.expanded} of 2000)`);
  t.equal(expandedByLoop, s?.expanded, "the loop stopped after the batch it held");
  const rows = await recipients("p3");
  t.equal(rows.length, s?.expanded, "the count is the recipients written");
  t.equal(rows.at(-1)?.user_id, s?.cursor, "and the cursor the last of them");
  t.match(await expandBatch(deps, 20), { kind: "idle" });

  await resumeBroadcastExpansion(database, null, "p3");
  await expandBroadcasts(deps, 200);
  const done = await recipients("p3");
  t.equal(done.length, 2000);
  t.equal(new Set(done.map((r) => r.user_id)).size, 2000, "every member once");
  t.match(await state("p3"), { status: "expanded", expanded: 2000 });
});
