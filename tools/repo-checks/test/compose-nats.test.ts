import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  answerRequests,
  applyTopology,
  type Bus,
  composeNatsConfig,
  connectBus,
  NATS_CONF_FILE,
  passwordVariable,
  ROLES,
  type Role,
  requestReply,
} from "@notify/bus";
import { ROOT } from "@notify/devstack";
import { startNatsWithUsers } from "@notify/testing";
import t from "tap";
import { parse } from "yaml";

// The compose check: compose.yaml runs NATS with nats/nats.conf and gives every app its own user,
// and the real server, run with that file, lets each user do what its app needs and nothing more.
// NEEDS below is written by hand from what each app does, not derived from
// libs/bus/src/nats-users.ts (which generates the file): a grant added there that an app does not
// need fails here.

interface Service {
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
}
const compose = parse(readFileSync(join(ROOT, "compose.yaml"), "utf8"), { merge: true }) as {
  services: Record<string, Service>;
};
/** The role a service's process plays, from what it runs. */
function roleOfService(service: Service): Role | undefined {
  const script = service.command?.[1] ?? "";
  if (script === "libs/bus/dist/apply-cli.js") return "setup";
  const app = /^apps\/(ingest|processor|workers|receipts)\/dist\/main\.js$/.exec(script)?.[1];
  return app as Role | undefined;
}

type Capability =
  | { request: string; body?: unknown }
  | { publish: string }
  | { subscribe: string | ((role: Role) => string) };
const bucket = (name: string): Record<string, Capability> => ({
  [`read ${name}`]: { request: `$JS.API.DIRECT.GET.KV_${name}.$KV.${name}.probe` },
  [`write ${name}`]: { request: `$KV.${name}.probe`, body: "{}" },
});
const next = { batch: 1, no_wait: true };
const CAPABILITIES: Record<string, Capability> = {
  "create a stream": {
    request: "$JS.API.STREAM.CREATE.PROBE",
    body: { name: "PROBE", subjects: ["probe.>"], storage: "memory" },
  },
  "change a stream": { request: "$JS.API.STREAM.UPDATE.NOTIFY_DLQ" },
  "purge a stream": { request: "$JS.API.STREAM.PURGE.NOTIFY_WORK", body: { filter: "notify.work.none.none" } },
  "delete a stream": { request: "$JS.API.STREAM.DELETE.PROBE_ABSENT" },
  "list streams": { request: "$JS.API.STREAM.NAMES" },
  "add a work consumer": {
    request: "$JS.API.CONSUMER.DURABLE.CREATE.NOTIFY_WORK.probe",
    body: {
      stream_name: "NOTIFY_WORK",
      config: { durable_name: "probe", ack_policy: "explicit", filter_subject: "notify.work.probe.none" },
    },
  },
  "delete a work consumer": { request: "$JS.API.CONSUMER.DELETE.NOTIFY_WORK.probe-absent" },
  "publish to the transactional lane": { request: "notify.lane.transactional.0", body: "{}" },
  "publish to the promotional lane": { request: "notify.lane.promotional.0", body: "{}" },
  "publish work items": { request: "notify.work.email.transactional", body: "{}" },
  "publish dead letters": { request: "notify.dlq.email", body: "{}" },
  "set lane poison aside": { request: "notify.dlq.poison.NOTIFY_LANE_TRANSACTIONAL", body: "x" },
  "set work poison aside": { request: "notify.dlq.poison.NOTIFY_WORK", body: "x" },
  "pull the lanes": {
    request: "$JS.API.CONSUMER.MSG.NEXT.NOTIFY_LANE_PROMOTIONAL.processor-promotional-p0",
    body: next,
  },
  "pull the work queue": { request: "$JS.API.CONSUMER.MSG.NEXT.NOTIFY_WORK.worker-sms-promotional", body: next },
  "browse dead letters": {
    request: "$JS.API.CONSUMER.CREATE.NOTIFY_DLQ.probe_browse",
    body: {
      stream_name: "NOTIFY_DLQ",
      config: { name: "probe_browse", ack_policy: "none", mem_storage: true, inactive_threshold: 5e9 },
    },
  },
  "get a stored lane message": { request: "$JS.API.STREAM.MSG.GET.NOTIFY_LANE_PROMOTIONAL", body: { seq: 1 } },
  "get a stored work item": { request: "$JS.API.STREAM.MSG.GET.NOTIFY_WORK", body: { seq: 1 } },
  "get a stored dead letter": { request: "$JS.API.STREAM.MSG.GET.NOTIFY_DLQ", body: { seq: 1 } },
  "list the work queue's consumers": { request: "$JS.API.CONSUMER.LIST.NOTIFY_WORK", body: {} },
  ...bucket("notify_send_guard"),
  ...bucket("notify_rate"),
  ...bucket("notify_leases"),
  ...bucket("notify_breakers"),
  ...bucket("notify_workers"),
  "announce key changes": { publish: "notify.events.keys" },
  "hear key changes": { subscribe: "notify.events.keys" },
  "announce template changes": { publish: "notify.events.templates" },
  "hear template changes": { subscribe: "notify.events.templates" },
  "ask for the dead-letter list": { publish: "notify.ops.dlq.list" },
  "ask for a dead letter": { publish: "notify.ops.dlq.show" },
  "ask for a dead-letter replay": { publish: "notify.ops.replay" },
  "ask for a cancel": { publish: "notify.ops.cancel" },
  "answer the dead-letter list": { subscribe: "notify.ops.dlq.list" },
  "answer requests for a dead letter": { subscribe: "notify.ops.dlq.show" },
  "answer dead-letter replays": { subscribe: "notify.ops.replay" },
  "answer cancels": { subscribe: "notify.ops.cancel" },
  "subscribe to every subject": { subscribe: ">" },
  "subscribe to the lanes' subjects": { subscribe: "notify.lane.>" },
  "read another role's replies": { subscribe: (role) => `_INBOX.${role === "ingest" ? "workers" : "ingest"}.>` },
};
type Name = keyof typeof CAPABILITIES;

const ADMINISTRATION: Name[] = [
  "create a stream",
  "change a stream",
  "purge a stream",
  "delete a stream",
  "list streams",
  "add a work consumer",
  "delete a work consumer",
  "pull the lanes",
  "pull the work queue",
  "browse dead letters",
  "get a stored lane message",
  "get a stored work item",
  "get a stored dead letter",
  "list the work queue's consumers",
  "read notify_send_guard",
  "read notify_rate",
  "read notify_leases",
  "read notify_breakers",
  "read notify_workers",
];
const NEEDS: Record<Role, Name[]> = {
  // The JetStream API is its job; it publishes no work and reads nobody's replies.
  setup: ADMINISTRATION,
  // Accepted notifications to the lanes; the dead-letter routes, which it only asks the processor
  // for (no consumer of its own on any stream, no work item, no send guard); the operator's views
  // of the streams' consumers and of the workers' reports, breaker decisions and token buckets,
  // which it only reads.
  ingest: [
    "publish to the transactional lane",
    "publish to the promotional lane",
    "list the work queue's consumers",
    "ask for the dead-letter list",
    "ask for a dead letter",
    "ask for a dead-letter replay",
    "ask for a cancel",
    "read notify_workers",
    "read notify_breakers",
    "read notify_rate",
    "announce key changes",
    "hear key changes",
    "announce template changes",
    "hear template changes",
  ],
  // Lanes in; work items and broadcast recipients out; poison aside; the reconciler's look at the
  // oldest stored message; the partition and singleton leases; template
  // changes; the dead-letter reads and replays ingest asks for (letters, the send guard, work items).
  processor: [
    "publish to the promotional lane",
    "publish work items",
    "set lane poison aside",
    "pull the lanes",
    "get a stored lane message",
    "get a stored work item",
    "browse dead letters",
    "get a stored dead letter",
    "read notify_leases",
    "write notify_leases",
    "read notify_send_guard",
    "write notify_send_guard",
    "hear template changes",
    "answer the dead-letter list",
    "answer requests for a dead letter",
    "answer dead-letter replays",
    "answer cancels",
  ],
  // Work in; dead letters and poison out; the send guard, the shared token buckets and breakers.
  workers: [
    "publish dead letters",
    "set work poison aside",
    "pull the work queue",
    "read notify_send_guard",
    "write notify_send_guard",
    "read notify_rate",
    "write notify_rate",
    "read notify_breakers",
    "write notify_breakers",
    "read notify_workers",
    "write notify_workers",
  ],
  // Its readiness only reports the connection.
  receipts: [],
  // notify dlq list / show / poison / replay.
  operator: [
    "publish work items",
    "browse dead letters",
    "get a stored dead letter",
    "read notify_send_guard",
    "write notify_send_guard",
    "announce key changes",
  ],
};

t.test("nats/nats.conf is what libs/bus generates (npm run nats:config)", async (t) => {
  t.equal(readFileSync(NATS_CONF_FILE, "utf8"), composeNatsConfig());
});

t.test("compose runs NATS with nats/nats.conf and a password for every role", async (t) => {
  const nats = compose.services.nats as Service;
  const flag = nats.command?.indexOf("-c") ?? -1;
  t.ok(flag >= 0, "nats-server is given a configuration file");
  const inContainer = nats.command?.[flag + 1];
  t.ok(
    nats.volumes?.includes(`./nats/nats.conf:${inContainer}:ro`),
    "the file it reads is the repository's nats/nats.conf, read-only",
  );
  for (const role of ROLES) {
    t.match(nats.environment?.[passwordVariable(role)], new RegExp(`^\\$\\{${passwordVariable(role)}:\\?`), role);
  }
});

t.test("every compose service that talks to NATS does so as its own user", async (t) => {
  const connecting = Object.entries(compose.services).filter(([, s]) => s.environment?.NATS_URL !== undefined);
  t.same(
    connecting.filter(([, s]) => roleOfService(s) === undefined).map(([name]) => name),
    [],
    "no other service connects",
  );
  t.same([...new Set(connecting.map(([, s]) => roleOfService(s)))].sort(), [
    "ingest",
    "processor",
    "receipts",
    "setup",
    "workers",
  ]);
  for (const [name, service] of connecting) {
    const role = roleOfService(service) as Role;
    const env = service.environment ?? {};
    t.equal(env.NATS_USER, role, `${name} connects as ${role}`);
    t.match(env.NATS_PASSWORD, new RegExp(`^\\$\\{${passwordVariable(role)}:\\?`), `${name} has ${role}'s password`);
    // Only the setup job may create the topology: the apps wait for it.
    if (role !== "setup") t.equal(env.NATS_TOPOLOGY, "verify", `${name} only checks the topology`);
  }
});

t.test("on the real server each role may do what its app needs and nothing more", async (t) => {
  const nats = await startNatsWithUsers(t);
  const as = async (role: Role): Promise<Bus> => {
    const bus = await connectBus({
      servers: nats.url,
      name: `probe-${role}`,
      role,
      user: role,
      password: nats.passwords[role],
      namespace: "",
      partitions: 1,
    });
    t.teardown(() => bus.close());
    return bus;
  };
  const setup = await as("setup");
  await applyTopology(setup);
  const dlq = (await setup.jsm.streams.info("NOTIFY_DLQ")).config;
  (CAPABILITIES["change a stream"] as { body?: unknown }).body = dlq;

  // A capability is granted when the server answers the request at all (a JetStream error such as
  // "not found" is an answer) or keeps the subscription; refused, the client hears a permissions
  // violation at once.
  const allowed = async (bus: Bus, role: Role, capability: Capability): Promise<boolean> => {
    if ("publish" in capability) {
      // A plain publish has no answer: the server tells a refused one as an asynchronous error.
      let refused = false;
      const watching = (async () => {
        for await (const status of bus.nc.status()) {
          if (status.type === "error" && String(status.error).includes(capability.publish)) refused = true;
        }
      })();
      bus.nc.publish(capability.publish, "{}");
      await bus.nc.flush();
      await new Promise((resolve) => setTimeout(resolve, 100));
      void watching;
      return !refused;
    }
    if ("subscribe" in capability) {
      const subject = typeof capability.subscribe === "string" ? capability.subscribe : capability.subscribe(role);
      const sub = bus.nc.subscribe(subject);
      await bus.nc.flush();
      await new Promise((resolve) => setTimeout(resolve, 100));
      const kept = !sub.isClosed();
      sub.unsubscribe();
      return kept;
    }
    const body =
      capability.body === undefined
        ? ""
        : typeof capability.body === "string"
          ? capability.body
          : JSON.stringify(capability.body);
    try {
      // Its own reply subscription: a pulled message arrives under its stream subject, which the
      // shared one would not match to the request.
      await bus.nc.request(capability.request, body, { timeout: 2000, noMux: true });
      return true;
    } catch (error) {
      if ((error as Error).message.includes("Permissions Violation")) return false;
      throw error;
    }
  };

  for (const role of ROLES) {
    const bus = role === "setup" ? setup : await as(role);
    const granted: Name[] = [];
    for (const [name, capability] of Object.entries(CAPABILITIES)) {
      if (await allowed(bus, role, capability)) granted.push(name);
    }
    t.same(granted.sort(), [...NEEDS[role]].sort(), `${role}: exactly what it needs`);
  }
  t.ok(nats.violations().length > 0, "the server logged the refusals (the probe reached it)");
});

t.test("ingest may not publish a work item or write a send guard: it asks the processor, which answers", async (t) => {
  const nats = await startNatsWithUsers(t);
  const as = async (role: Role): Promise<Bus> => {
    const bus = await connectBus({
      servers: nats.url,
      name: `probe-${role}`,
      role,
      user: role,
      password: nats.passwords[role],
      namespace: "",
      partitions: 1,
      publishTimeoutMs: 2000,
    });
    t.teardown(() => bus.close());
    return bus;
  };
  await applyTopology(await as("setup"));
  const ingest = await as("ingest");
  const processor = await as("processor");
  const refused = async (attempt: Promise<unknown>) =>
    attempt.then(
      () => "done",
      (error: Error) =>
        /Permissions Violation/i.test(`${error.message} ${String(error.cause)}`) ? "refused" : error.message,
    );

  const work = ingest.subjects.work("email", "transactional");
  t.equal(await refused(ingest.nc.request(work, "{}", { timeout: 2000, noMux: true })), "refused", "a work item");
  const before = (await processor.jsm.streams.info(processor.streams.work)).state.messages;
  await t.rejects(ingest.publish(work, { notification_id: "n" }, "probe-work"), "through the bus's publisher too");
  t.equal((await processor.jsm.streams.info(processor.streams.work)).state.messages, before, "nothing stored");
  const guardWrite = ingest.nc.request("$KV.notify_send_guard.n_email", '{"state":"failed"}', {
    timeout: 2000,
    noMux: true,
  });
  t.equal(await refused(guardWrite), "refused", "a send guard write");
  t.equal(
    await refused(
      ingest.nc.request("$JS.API.DIRECT.GET.KV_notify_send_guard.$KV.notify_send_guard.n_email", "", {
        timeout: 2000,
        noMux: true,
      }),
    ),
    "refused",
    "nor read one",
  );
  // The processor may do both, and answers ingest's request: its reply goes to ingest's inbox.
  const guard = await processor.kv("notify_send_guard");
  t.ok((await guard.put("n_email", '{"state":"failed"}')) > 0, "the processor writes the guard");
  const responder = answerRequests(processor, processor.subjects.opsReplay, "processor-replay", async (body) => ({
    ok: true,
    value: { heard: body },
  }));
  t.teardown(() => responder.stop());
  await responder.ready;
  t.same(await requestReply(ingest, ingest.subjects.opsReplay, { all: true }, 5000), {
    ok: true,
    value: { heard: { all: true } },
  });
});

t.test("ingest may create no consumer on any stream: it asks the processor for the dead letters", async (t) => {
  const nats = await startNatsWithUsers(t);
  const as = async (role: Role): Promise<Bus> => {
    const bus = await connectBus({
      servers: nats.url,
      name: `probe-${role}`,
      role,
      user: role,
      password: nats.passwords[role],
      namespace: "",
      partitions: 1,
    });
    t.teardown(() => bus.close());
    return bus;
  };
  const setup = await as("setup");
  await applyTopology(setup);
  const ingest = await as("ingest");
  const streams: string[] = [];
  for await (const name of setup.jsm.streams.names()) streams.push(name);
  t.ok(streams.includes("NOTIFY_DLQ") && streams.includes("KV_notify_workers"), "the streams and the buckets' streams");
  const consumersOf = async () => {
    const counts: Record<string, number> = {};
    for (const stream of streams) counts[stream] = (await setup.jsm.streams.info(stream)).state.consumer_count;
    return counts;
  };
  const before = await consumersOf();

  // The push consumer a compromised ingest would make: every letter delivered onto a subject it
  // may not publish to (the server does not check a deliver subject against its creator's grants).
  const push = { ack_policy: "none", deliver_policy: "all", deliver_subject: "notify.work.email.transactional" };
  const attempts = (stream: string): Array<[string, unknown]> => [
    [`$JS.API.CONSUMER.CREATE.${stream}`, { stream_name: stream, config: push }],
    [`$JS.API.CONSUMER.CREATE.${stream}.probe`, { stream_name: stream, config: { ...push, name: "probe" } }],
    [
      `$JS.API.CONSUMER.CREATE.${stream}.probe.notify.dlq.email`,
      { stream_name: stream, config: { ...push, name: "probe", filter_subject: "notify.dlq.email" } },
    ],
    [
      `$JS.API.CONSUMER.DURABLE.CREATE.${stream}.probe`,
      { stream_name: stream, config: { ...push, durable_name: "probe" } },
    ],
  ];
  for (const stream of streams) {
    for (const [subject, body] of attempts(stream)) {
      const outcome = await ingest.nc.request(subject, JSON.stringify(body), { timeout: 2000, noMux: true }).then(
        () => "answered",
        (error: Error) => (error.message.includes("Permissions Violation") ? "refused" : error.message),
      );
      t.equal(outcome, "refused", subject);
    }
  }
  // Through the client as the apps read a stream (an ordered consumer), and as a manager would.
  await t.rejects(
    (async () => {
      const consumer = await ingest.js.consumers.get("NOTIFY_DLQ");
      await consumer.info();
    })(),
    "no ordered consumer on the dead letters",
  );
  await t.rejects(
    ingest.jsm.consumers.add("NOTIFY_DLQ", { name: "probe", ack_policy: "none" } as Parameters<
      Bus["jsm"]["consumers"]["add"]
    >[1]),
    /Permissions Violation|timeout/i,
  );
  t.same(await consumersOf(), before, "no consumer was made");

  // What ingest reads of the dead letters, the processor answers it.
  const processor = await as("processor");
  const responder = answerRequests(processor, processor.subjects.opsDlqList, "processor-dlq", async () => ({
    ok: true,
    value: { page: (await processor.jsm.streams.info(processor.streams.dlq)).state.messages },
  }));
  t.teardown(() => responder.stop());
  await responder.ready;
  t.same(await requestReply(ingest, ingest.subjects.opsDlqList, {}, 5000), { ok: true, value: { page: 0 } });
});

t.test("a wrong password, or none, is refused", async (t) => {
  const nats = await startNatsWithUsers(t);
  const attempt = (user?: string, password?: string) =>
    connectBus({
      servers: nats.url,
      name: "probe",
      ...(user ? { user, password: password ?? "" } : {}),
      namespace: "",
      partitions: 1,
    }).then(
      async (bus) => {
        await bus.close();
        return "connected";
      },
      (error: Error) => error.message,
    );
  t.match(await attempt("ingest", "wrong"), /Authorization/i);
  t.match(await attempt(), /Authorization/i);
  t.match(await attempt("workers", nats.passwords.ingest), /Authorization/i, "another role's password");
});
