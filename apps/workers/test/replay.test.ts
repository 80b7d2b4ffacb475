import { run } from "@notify/cli";
import type { WorkItem } from "@notify/core";
import { startSendgridSandbox } from "@notify/devstack";
import { createSendgridProvider } from "@notify/providers";
import { eventually } from "@notify/testing";
import t from "tap";
import { startConsumers } from "../src/consumers.js";
import { channelRow, deadLetters, harness, statusHistory, workItem } from "./helpers.js";

// Spec rule 14 end to end: a send refused for a bad address is dead-lettered by the real pools,
// the user's address is fixed, `notify dlq replay` hands it back, the same pools deliver it
// once; replaying again never sends a delivered notification twice.
const h = await harness(t);
const sandbox = await startSendgridSandbox({ port: 0, apiKey: "SG.test" });
t.teardown(() => sandbox.close());
const gates = h.gates([
  createSendgridProvider({ apiKey: "SG.test", baseUrl: sandbox.url, from: "n@example.com", timeoutMs: 2000 }),
]);
const delivery = await startConsumers({
  ...h.deps(gates[0] as (typeof gates)[0]),
  databases: { transactional: h.database, promotional: h.database },
  gates,
  concurrency: { transactional: 2, promotional: 2 },
});
t.teardown(() => delivery.stop());

async function notify(argv: string[]) {
  let stdout = "";
  let stderr = "";
  const io = { stdout: { write: (s: string) => (stdout += s) }, stderr: { write: (s: string) => (stderr += s) } };
  const code = await run(argv, io, { database: h.database, bus: async () => h.bus, criticalCategories: [] });
  return { code, stdout, stderr };
}

const publish = (item: WorkItem) =>
  h.bus.publish(h.bus.subjects.work(item.channel, item.priority), item, `${item.notification_id}:${item.channel}`);

t.test("a dead letter replayed after a fix is delivered once, and never again", async (t) => {
  const item = await workItem(h.database, { userId: "ada", to: "ada@old.example" });
  await h.database.sql`insert into user_contacts (user_id, email) values ('ada', 'ada@old.example')`;
  sandbox.fault({ status: 400, match_to: "ada@old.example" });
  await publish(item);
  await eventually(async () => ((await channelRow(h.database, item))?.status === "failed" ? true : undefined));
  const [letter] = await deadLetters(h.bus, item.notification_id);
  t.match(letter, { class: "permanent", reason: /^sendgrid 400/ });

  await h.database.sql`update user_contacts set email = 'ada@new.example' where user_id = 'ada'`;
  const dry = await notify(["dlq", "replay", "--notification", item.notification_id, "--dry-run"]);
  t.match(dry.stdout, /ada@new\.example\s+would replay to the user's new address/);
  t.equal((await channelRow(h.database, item))?.status, "failed", "a dry run changes nothing");

  const out = await notify(["dlq", "replay", "--notification", item.notification_id]);
  t.equal(out.code, 0, out.stderr);
  t.match(out.stdout, /1 replayed, 0 skipped/);
  const row = await eventually(async () => {
    const r = await channelRow(h.database, item);
    return r?.status === "delivered" ? r : undefined;
  });
  t.match(row, { attempts: 2 });
  const mails = sandbox.messages().filter((m) => m.custom_args.notification_id === item.notification_id);
  t.same(
    mails.map((m) => m.to[0]?.email),
    ["ada@new.example"],
    "sent once, to the fixed address",
  );
  t.same(
    (await statusHistory(h.database, item)).map((e) => [e.status, e.reason?.slice(0, 12) ?? null]),
    [
      ["failed", "sendgrid 400"],
      ["pending", "replay"],
      ["delivered", null],
    ],
  );

  const again = await notify(["dlq", "replay", "--notification", item.notification_id]);
  t.match(again.stdout, /skipped: channel is delivered/);
  await new Promise((resolve) => setTimeout(resolve, 500));
  t.equal(sandbox.messages().filter((m) => m.custom_args.notification_id === item.notification_id).length, 1);
});
