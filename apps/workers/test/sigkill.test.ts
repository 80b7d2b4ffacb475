import { nanos } from "@nats-io/transport-node";
import type { GuardValue } from "@notify/core";
import { startSendgridSandbox } from "@notify/devstack";
import { eventually, freshBus, freshDatabase } from "@notify/testing";
import t from "tap";
import { channelRow, deadLetters, statusHistory, workItem } from "./helpers.js";
import { publish, spawnWorker } from "./process-helpers.js";

// Invariant 2 with real processes: a worker is SIGKILLed after it called the provider, which
// accepts the send, and before it could write anything back. After a restart the provider has
// exactly one send, and the channel shows unsettled: never resent.
const { database, url } = await freshDatabase(t);
const bus = await freshBus(t);
const guard = await bus.kv("notify_send_guard");
const sandbox = await startSendgridSandbox({ port: 0, apiKey: "SG.test" });
t.teardown(() => sandbox.close());
const env = { PROVIDER_TIMEOUT_MS: "3000" };

t.test("a worker killed between the provider's acceptance and the status write never causes a resend", async (t) => {
  const item = await workItem(database, { to: "kill@example.com" });
  // The sandbox holds the request for 2 s, then accepts it: the kill lands while it is held, so
  // the provider accepts a send whose answer no worker ever reads.
  sandbox.fault({ delay_ms: 2000, match_to: "kill@example.com", times: 1 });
  const first = await spawnWorker(t, { databaseUrl: url, bus, sandboxUrl: sandbox.url, env });
  await publish(bus, item);

  const claim = await eventually(
    async () => {
      const value = (await guard.get(`${item.notification_id}.email`))?.json<GuardValue>();
      return value?.state === "sending" ? value : undefined;
    },
    15_000,
    "the worker claimed the guard and is calling the provider",
  );
  // The guard is claimed just before the request leaves: kill only once the sandbox holds it.
  await eventually(async () => (sandbox.holding() > 0 ? true : undefined), 10_000, "the sandbox holds the send");
  first.proc.child.kill("SIGKILL");
  t.equal(await first.proc.exited, null, "killed, not exited");
  const sent = () => sandbox.messages().filter((m) => m.custom_args.notification_id === item.notification_id).length;
  await eventually(async () => (sent() === 1 ? true : undefined), 10_000, "the provider accepted the send");
  t.match(await channelRow(database, item), { status: "pending", attempts: 0 }, "nothing was written back");

  const second = await spawnWorker(t, { databaseUrl: url, bus, sandboxUrl: sandbox.url, env });
  // Redelivery comes after the consumer's ack wait (30 s); an operator's `nats consumer edit
  // --wait 2s` makes the server redeliver now rather than in half a minute.
  const durable = "worker-email-transactional";
  await bus.jsm.consumers.update(bus.streams.work, durable, { ack_wait: nanos(2000) });

  const row = await eventually(
    async () => {
      const r = await channelRow(database, item);
      return r?.status === "unsettled" ? r : undefined;
    },
    30_000,
    "the restarted worker settled the channel",
  );
  t.match(row, { status: "unsettled", attempts: claim.attempt, reason: /stopped after the provider call began/ });
  t.equal(sent(), 1, "exactly one send reached the provider");
  t.match((await guard.get(`${item.notification_id}.email`))?.json<GuardValue>(), { state: "unknown" });
  t.match(await deadLetters(bus, item.notification_id), [{ class: "outcome_unknown", attempts: 1 }]);
  t.same(
    (await statusHistory(database, item)).map((e) => e.status),
    ["unsettled"],
  );
  t.equal(await second.proc.stop(), 0, "the restarted worker stops cleanly on SIGTERM");
  t.equal(sent(), 1, "and still one send");
});
