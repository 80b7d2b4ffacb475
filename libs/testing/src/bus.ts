import { randomBytes } from "node:crypto";
import { applyTopology, type Bus, bucketName, connectBus, loadTopologyFile, streamName } from "@notify/bus";
import { TEST_NATS_URL } from "./services.js";
import type { Teardown } from "./teardown.js";

/**
 * A NATS namespace of one test file: its streams, subjects and KV buckets carry a unique
 * prefix, and are deleted on teardown.
 */
export function freshNamespace(t: Teardown): string {
  const namespace = `t${randomBytes(5).toString("hex")}`;
  t.teardown(() => deleteNamespace(namespace));
  return namespace;
}

/**
 * A file stream that is never deleted. nats-server 2.9 removes the account's stream folder with
 * its last file stream, and a stream another test file creates at that instant fails with
 * "could not create storage directory": while this one exists, the folder never goes.
 */
const ANCHOR = { name: "NOTIFY_TEST_ANCHOR", subjects: ["notify_test_anchor"], max_msgs: 1 };

export async function deleteNamespace(namespace: string): Promise<void> {
  const bus = await connectBus({ servers: TEST_NATS_URL, name: "notify-test-cleanup", namespace, partitions: 1 });
  await bus.jsm.streams.add(ANCHOR).catch(() => undefined);
  const topology = loadTopologyFile();
  const naming = { namespace, partitions: 1 };
  const names = [
    ...topology.streams.map((s) => streamName(naming, s.name)),
    ...topology.kv.map((k) => `KV_${bucketName(naming, k.bucket)}`),
  ];
  for (const name of names) await bus.jsm.streams.delete(name).catch(() => false);
  await bus.close();
}

/** A connected bus in a fresh namespace of the real NATS, its topology applied; closed on teardown. */
export async function freshBus(t: Teardown, partitions = 2): Promise<Bus> {
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
