import { randomUUID } from "node:crypto";
import type { Bus } from "@notify/bus";
import { captureLogger, countingDatabase, freshBus, freshDatabase } from "@notify/testing";
import t, { type Test } from "tap";
import { createIngestor } from "../src/notifications/create.js";
import { minimalRequest as request } from "./support.js";

// How requests are grouped into batches. A batch costs a statement, a commit and a publish flush
// whatever its size, so the group commit must not send out batches of one while others wait:
// requests of one turn of the event loop go together, and a second batch overlaps the one in
// flight only once enough requests wait for it.
const { url } = await freshDatabase(t);
const realBus = await freshBus(t);
const { log } = captureLogger("ingest");

/** Counts the group commit's statements (the insert of a batch) and the rows each carried. */
async function counting() {
  const batches: number[] = [];
  const database = await countingDatabase(t, url, (query, parameters) => {
    // Its first parameter is the batch's ids.
    if (query.includes("insert into idempotency_keys")) batches.push((parameters[0] as string[]).length);
  });
  return { batches, database };
}

/** A bus whose publishes wait while `hold` is set: a batch in flight stays in flight. */
function holdingBus() {
  let release: () => void = () => {};
  const state = { held: null as Promise<void> | null };
  const bus: Bus = {
    ...realBus,
    async publish(subject, payload, msgId) {
      if (state.held) await state.held;
      return realBus.publish(subject, payload, msgId);
    },
  };
  return {
    bus,
    hold: () => {
      state.held = new Promise<void>((resolve) => (release = resolve));
    },
    release: () => {
      state.held = null;
      release();
    },
  };
}

const templates = async (id: string) => ({ id, version: 1, params: [] });
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
const until = async (check: () => boolean) => {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
};

t.test("requests made in one turn of the event loop are one batch", async (t) => {
  const counted = await counting();
  const ingestor = createIngestor({ database: counted.database, bus: realBus, log, templates });
  t.teardown(() => ingestor.drain());
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      ingestor.create({ clientId: "shop", idempotencyKey: randomUUID(), request: request(`u${i}`) }),
    ),
  );
  t.ok(results.every((r) => r.kind === "accepted"));
  t.same(counted.batches, [20], "one statement for the twenty");
});

/** An ingestor (a second batch at 8 waiting) whose first batch, of one request, is in flight. */
async function oneInFlight(t: Pick<Test, "teardown">) {
  const counted = await counting();
  const held = holdingBus();
  const ingestor = createIngestor({ database: counted.database, bus: held.bus, log, templates }, { overlapAt: 8 });
  t.teardown(() => ingestor.drain());
  const create = (user: string) =>
    ingestor.create({ clientId: "shop", idempotencyKey: randomUUID(), request: request(user) });
  held.hold();
  const first = create("first");
  await until(() => counted.batches.length === 1);
  return { counted, held, create, first };
}

t.test("while a batch is in flight, a few late requests wait for it and then go together", async (t) => {
  const { counted, held, create, first } = await oneInFlight(t);
  const late: Array<ReturnType<typeof create>> = [];
  for (let i = 0; i < 5; i++) {
    late.push(create(`late-${i}`));
    await nextTurn();
  }
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.same(counted.batches, [1], "five late requests in five turns: no batch of their own while one is in flight");
  held.release();
  await Promise.all([first, ...late]);
  t.same(counted.batches, [1, 5], "they went out together once the first was done");
});

t.test("once enough requests wait, a second batch overlaps the one in flight", async (t) => {
  const { counted, held, create, first } = await oneInFlight(t);
  const waiting = Array.from({ length: 8 }, (_, i) => create(`waiting-${i}`));
  await until(() => counted.batches.length === 2);
  t.same(counted.batches, [1, 8], "eight waiting: their batch is stored while the first is still publishing");
  held.release();
  const results = await Promise.all([first, ...waiting]);
  t.ok(results.every((r) => r.kind === "accepted"));
});

t.test("drain sends what waits for its turn", async (t) => {
  const counted = await counting();
  // A template answered from memory, as a cached one is: the request joins the queue at once.
  const cached = (id: string) => ({ id, version: 1, params: [] });
  const ingestor = createIngestor({ database: counted.database, bus: realBus, log, templates: cached });
  const pending = ingestor.create({ clientId: "shop", idempotencyKey: randomUUID(), request: request("last") });
  await ingestor.drain();
  t.same(counted.batches, [1]);
  t.equal((await pending).kind, "accepted");
});
