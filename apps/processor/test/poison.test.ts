import { readPoisonMessages } from "@notify/bus";
import { eventually } from "@notify/testing";
import t from "tap";
import { startConsumers } from "../src/consumers.js";
import { channelRows, processorFixture, publishLane, seedUser, storeNotifications } from "./helpers.js";

// A lane message the processor cannot read (not JSON, not UTF-8, or JSON that is not a lane
// message) is set aside with its bytes and the reason, counted and acknowledged: the partition
// goes on routing, with no crash loop and no retry of bytes that never change.
const { database, bus, deps } = await processorFixture(t, { partitions: 1, ttlMs: 5000 });
deps.now = () => new Date();
const poisoned: string[] = [];
deps.onPoison = (stream) => poisoned.push(stream);
await seedUser(database, "poison-1");

t.test("bad bytes on a lane are set aside; the good message behind them is routed", async (t) => {
  const subject = bus.subjects.lane("transactional", 0);
  const encoder = new TextEncoder();
  await bus.js.publish(subject, encoder.encode("<html>not json</html>"), { msgID: "bad-1" });
  await bus.js.publish(subject, new Uint8Array([0xc3, 0x28, 0x7b]), { msgID: "bad-2" });
  await bus.js.publish(subject, encoder.encode(JSON.stringify({ notification_id: "x", user_id: 5 })), {
    msgID: "bad-3",
  });
  const [message] = await storeNotifications(database, bus, [
    { user_id: "poison-1", priority: "transactional", channels: ["email"] },
  ]);
  if (!message) throw new Error("not stored");
  await publishLane(bus, [message]);

  const runners = await startConsumers(deps);
  t.teardown(() => Promise.all(runners.map((r) => r.stop())));
  await eventually(
    async () => ((await channelRows(database, message.notification_id)).email ? true : undefined),
    20_000,
    "the good message routed",
  );
  await eventually(async () => (poisoned.length === 3 ? true : undefined), 10_000, "three counted");
  t.same(poisoned, Array(3).fill(bus.streams.lane("transactional")), "each counted once, by stream");

  const kept = await readPoisonMessages(bus);
  t.same(
    kept.map((p) => p.reason.split(":")[0]),
    ["not UTF-8 JSON", "not UTF-8 JSON", "invalid"],
    "kept with the reason, in order",
  );
  t.match(kept[2]?.reason, /user_id/, "the reason names the field");
  t.equal(new TextDecoder().decode(kept[0]?.data), "<html>not json</html>", "and the raw bytes");
  const info = await bus.jsm.consumers.info(bus.streams.lane("transactional"), "processor-transactional-p0");
  t.equal(info.num_ack_pending, 0, "nothing left unacknowledged to come back");
  t.equal(info.num_redelivered, 0, "nothing was delivered twice");
});
