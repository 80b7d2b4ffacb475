import { createAudience } from "@notify/db";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import { progressLine } from "../src/broadcasts.js";
import { runCli } from "./support.js";

const { database } = await freshDatabase(t);

const notify = (argv: string[]) => runCli(argv, { database });

// A broadcast four members in, one recipient delivered, one suppressed on every channel.
const audience = await createAudience(database, "a1", "everyone");
await database.sql`insert into broadcasts (id, client_id, dedup_key, request_hash, audience_id, category, template_id, data, status, total, expanded)
  values ('b1', 'c', 'k', 'h', ${audience.id}, 'news', 'welcome', '{}', 'expanding', 10, 4)`;
for (const [i, status] of ["delivered", "suppressed", "pending", "pending"].entries()) {
  const id = `n${i}`;
  await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, 'c', ${`u${i}`}, 'news', 'welcome', 'promotional', '{}', ${id}, 'h', 0)`;
  await database.sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'email', ${status})`;
  await database.sql`insert into broadcast_recipients values ('b1', ${`u${i}`}, ${id})`;
}

t.test("notify broadcasts show: the progress as a bar or as JSON", async (t) => {
  const shown = await notify(["broadcasts", "show", "b1"]);
  t.equal(shown.code, 0, shown.stderr);
  t.equal(
    shown.stdout,
    "[############------------------]  40% 4/10 expanded · 1 delivered · 1 suppressed · 0 failed · expanding\n",
  );
  const json = await notify(["broadcasts", "show", "b1", "--json"]);
  t.match(JSON.parse(json.stdout), {
    broadcast_id: "b1",
    total: 10,
    expanded: 4,
    delivered: 1,
    suppressed: 1,
    failed: 0,
  });
  t.equal((await notify(["broadcasts", "show", "nope"])).code, 1, "an unknown broadcast fails");
  t.equal((await notify(["broadcasts", "show"])).code, 2, "the id is required");
});

t.test("notify broadcasts watch redraws until the broadcast stops expanding", async (t) => {
  // postgres.js runs a query when it is awaited or then'd.
  setTimeout(
    () => database.sql`update broadcasts set status = 'expanded', expanded = 10 where id = 'b1'`.then(() => {}),
    300,
  );
  const watched = await notify(["broadcasts", "watch", "b1", "--interval", "0.1", "--for", "20", "--json"]);
  t.equal(watched.code, 0, watched.stderr);
  const lines = watched.stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { status: string; expanded: number });
  t.ok(lines.length >= 2, "polled more than once");
  t.equal(lines[0]?.status, "expanding");
  t.match(lines.at(-1), { status: "expanded", expanded: 10 }, "stops at the final state");
});

t.test("the bar is full for an empty audience and never overflows", async (t) => {
  const base = {
    broadcast_id: "x",
    client_id: "shop",
    audience_id: "a",
    status: "expanded",
    category: "c",
    template_id: "t",
    suppressed: 0,
    delivered: 0,
    failed: 0,
    counted_at: "",
    created_at: "",
    finished_at: null,
  };
  t.match(progressLine({ ...base, total: 0, expanded: 0 }), /^\[#{30}\] 100%/);
  t.match(progressLine({ ...base, total: 5, expanded: 7 }), /^\[#{30}\] 100%/, "members added after acceptance");
});
