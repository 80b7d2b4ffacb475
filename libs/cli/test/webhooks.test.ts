import { createEndpoint } from "@notify/db";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import { runCli } from "./support.js";

// `notify webhooks list`: every client's endpoints with their figures, read in one query.
const { database } = await freshDatabase(t);

const notify = (argv: string[]) => runCli(argv, { database });

t.test("webhooks list shows each endpoint's backlog and dead letters", async (t) => {
  t.match((await notify(["webhooks", "list"])).stdout, "no webhook endpoints");
  const endpoint = async (clientId: string, name: string) => {
    const created = await createEndpoint(
      database,
      clientId,
      { url: `https://hooks.example.com/${name}`, eventTypes: null, include: [], description: null },
      20,
    );
    if (created === "limit_reached") throw new Error("no more endpoints for this client");
    return created;
  };
  const shop = await endpoint("shop", "shop");
  const blog = await endpoint("blog", "blog");
  // Three events owed to shop's endpoint (the event trigger's deliveries replaced): one dead, two waiting.
  await database.sql`insert into webhook_events (client_id, type, data)
    select 'shop', 'channel.failed', '{}' from generate_series(1, 3)`;
  await database.sql`delete from webhook_deliveries`;
  await database.sql`
    insert into webhook_deliveries (endpoint_id, event_id, status)
    select ${shop.id}, id, case when row_number() over (order by id) = 1 then 'dead' else 'waiting' end
    from webhook_events where client_id = 'shop'`;

  const listed = await notify(["webhooks", "list", "--json"]);
  t.equal(listed.code, 0, listed.stderr);
  const rows = JSON.parse(listed.stdout) as Array<{ id: string; figures: { backlog: number; dead: number } }>;
  t.match(rows.find((r) => r.id === shop.id)?.figures, { backlog: 2, dead: 1 });
  t.match(rows.find((r) => r.id === blog.id)?.figures, { backlog: 0, dead: 0 });

  const table = (await notify(["webhooks", "list", "--client", "blog"])).stdout;
  t.match(table, blog.id);
  t.notMatch(table, shop.id, "--client keeps to one client's endpoints");
});

t.test("webhooks dead lists an endpoint's dead letters; replay owes them again; enable resumes it", async (t) => {
  const created = await createEndpoint(
    database,
    "dead-shop",
    { url: "https://hooks.example.com/dead", eventTypes: null, include: [], description: null },
    20,
  );
  if (created === "limit_reached") throw new Error("no more endpoints for this client");
  const [event] = await database.sql<Array<{ id: string }>>`
    insert into webhook_events (client_id, type, data) values ('dead-shop', 'channel.failed', '{}') returning id`;
  await database.sql`update webhook_deliveries set status = 'dead', attempts = 10, last_error = 'HTTP 500'
    where endpoint_id = ${created.id}`;
  await database.sql`update webhook_endpoints set status = 'disabled', disabled_reason = 'failing', disabled_at = now()
    where id = ${created.id}`;

  const dead = await notify(["webhooks", "dead", created.id, "--json"]);
  t.equal(dead.code, 0, dead.stderr);
  t.match(JSON.parse(dead.stdout), [{ event_id: `evt_${event?.id}`, attempts: 10, last_error: "HTTP 500" }]);
  t.match((await notify(["webhooks", "dead", created.id])).stdout, "HTTP 500");

  const enabled = await notify(["webhooks", "enable", created.id]);
  t.equal(enabled.code, 0, enabled.stderr);
  const replayed = await notify(["webhooks", "replay", created.id, "--event", `evt_${event?.id}`]);
  t.equal(replayed.code, 0, replayed.stderr);
  t.match(replayed.stdout, "1 event(s) owed again");
  const ranged = await notify([
    "webhooks",
    "replay",
    created.id,
    "--since",
    new Date(Date.now() - 60_000).toISOString(),
  ]);
  t.match(ranged.stdout, "1 event(s) owed again", "a range replays it too");
  const [row] = await database.sql`select d.status, e.status as endpoint from webhook_deliveries d
    join webhook_endpoints e on e.id = d.endpoint_id where d.endpoint_id = ${created.id}`;
  t.match(row, { status: "waiting", endpoint: "enabled" });
  t.not((await notify(["webhooks", "replay", created.id])).code, 0, "a replay names events or a range");
});
