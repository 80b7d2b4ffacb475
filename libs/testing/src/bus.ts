import { applyTopology, type Bus, connectBus } from "@notify/bus";
import { freshNamespace, TEST_NATS_URL } from "./index.js";

/** A connected bus in a fresh namespace of the real NATS, its topology applied; closed on teardown. */
export async function freshBus(t: { teardown(fn: () => unknown): void }, partitions = 2): Promise<Bus> {
  const namespace = freshNamespace(t);
  const bus = await connectBus({ servers: TEST_NATS_URL, name: "notify-test", namespace, partitions });
  t.teardown(() => bus.close());
  await applyTopology(bus);
  return bus;
}

/** Messages currently stored in a stream. */
export async function streamCount(bus: Bus, stream: string): Promise<number> {
  return (await bus.jsm.streams.info(stream)).state.messages;
}
