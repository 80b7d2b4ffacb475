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
