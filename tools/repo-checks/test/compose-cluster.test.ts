import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { connectBus, NATS_CONF_FILE, passwordVariable, ROLES, type Role, verifyTopology } from "@notify/bus";
import { findNatsServer, ROOT } from "@notify/devstack";
import { eventually, freePort } from "@notify/testing";
import t from "tap";
import { parse } from "yaml";

// compose.yaml's cluster profile, checked without a Docker engine: its shape (three NATS nodes
// routed to each other, the setup job at three replicas, two instances of every app configured
// as the single-node service is) statically, and the nodes' own command lines for real: three
// nats-server processes run with them (addresses moved to loopback) form a JetStream cluster,
// and the setup job's own program, with its own environment, puts every stream and bucket on
// all three.

interface Service {
  profiles?: string[];
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: unknown;
}
const compose = parse(readFileSync(join(ROOT, "compose.yaml"), "utf8"), { merge: true }) as {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
};
const services = compose.services;
const inCluster = Object.entries(services).filter(([, s]) => s.profiles?.includes("cluster"));
const single = Object.entries(services).filter(([, s]) => s.profiles === undefined);
const runs =
  (script: string) =>
  ([, s]: [string, Service]) =>
    s.command?.[1] === script;
const nodes = inCluster.filter(([, s]) => s.command?.[0] === "nats-server");
const flag = (command: string[] | undefined, name: string) => {
  const at = command?.indexOf(name) ?? -1;
  return at < 0 ? undefined : command?.[at + 1];
};
const APPS = ["ingest", "processor", "workers", "receipts"] as const;

t.test("three NATS nodes, each routed to the other two, each with its own store", async (t) => {
  t.equal(nodes.length, 3);
  const names = nodes.map(([, s]) => flag(s.command, "-n"));
  t.same(
    names,
    nodes.map(([name]) => name),
    "each server is named as its service (names must be unique)",
  );
  for (const [name, s] of nodes) {
    t.equal(flag(s.command, "--cluster_name"), "notify", `${name} joins the one cluster`);
    t.equal(flag(s.command, "--cluster"), "nats://0.0.0.0:6222", `${name} listens for routes`);
    const routes = (flag(s.command, "--routes") ?? "").split(",").sort();
    const others = nodes.filter(([other]) => other !== name).map(([other]) => `nats://${other}:6222`);
    t.same(routes, others.sort(), `${name} routes to the other two`);
    t.ok(s.command?.includes("-js"), `${name} runs JetStream`);
    t.equal(flag(s.command, "-c"), "/etc/nats/nats.conf");
    t.ok(s.volumes?.includes("./nats/nats.conf:/etc/nats/nats.conf:ro"), `${name} reads the repository's users`);
    const store = s.volumes?.find((v) => v.endsWith(`:${flag(s.command, "-sd")}`))?.split(":")[0];
    t.ok(store && store in compose.volumes, `${name} keeps its store in a named volume`);
    for (const role of ROLES) t.ok(s.environment?.[passwordVariable(role)], `${name} has ${role}'s password`);
    t.ok(s.healthcheck, `${name} is healthy only when JetStream is up`);
  }
  const stores = nodes.map(([, s]) => s.volumes?.[0]?.split(":")[0]);
  t.equal(new Set(stores).size, 3, "no two nodes share a store");
});

t.test("the setup job puts every stream and bucket on three replicas, over all three nodes", async (t) => {
  const setup = inCluster.filter(runs("libs/bus/dist/apply-cli.js"));
  t.equal(setup.length, 1);
  const [name, s] = setup[0] as [string, Service];
  t.equal(s.environment?.NATS_REPLICAS, "3");
  t.same(
    s.environment?.NATS_URL?.split(",").sort(),
    nodes.map(([node]) => `nats://${node}:4222`).sort(),
    `${name} knows every node`,
  );
  t.equal(s.environment?.NATS_USER, "setup");
  for (const [node] of nodes) t.equal(s.depends_on?.[node]?.condition, "service_healthy", `waits for ${node}`);
});

t.test("two instances of every app, each configured as the single-node service but for NATS", async (t) => {
  const setupName = (inCluster.find(runs("libs/bus/dist/apply-cli.js")) as [string, Service])[0];
  for (const app of APPS) {
    const script = `apps/${app}/dist/main.js`;
    const instances = inCluster.filter(runs(script));
    t.equal(instances.length, 2, `two ${app} instances`);
    const [, alone] = single.find(runs(script)) as [string, Service];
    for (const [name, s] of instances) {
      const env = { ...s.environment };
      t.same(
        env.NATS_URL?.split(",").sort(),
        nodes.map(([node]) => `nats://${node}:4222`).sort(),
        `${name} knows every node`,
      );
      const { NATS_URL: _url, INSTANCE_ID: _id, ...rest } = env;
      const { NATS_URL: _aloneUrl, ...aloneRest } = alone.environment ?? {};
      t.same(rest, aloneRest, `${name} has the single-node ${app}'s settings`);
      t.equal(env.NATS_TOPOLOGY, "verify", `${name} waits for the setup job`);
      t.equal(s.depends_on?.[setupName]?.condition, "service_completed_successfully");
      t.notOk(s.depends_on?.nats ?? s.depends_on?.["nats-setup"], `${name} does not start the single node`);
      t.same(s.healthcheck, alone.healthcheck, `${name} is checked as ${app} is`);
    }
    if (app === "processor") {
      const ids = instances.map(([, s]) => s.environment?.INSTANCE_ID);
      t.ok(ids.every(Boolean) && new Set(ids).size === 2, "processors keep stable, distinct instance ids");
    }
    if (app === "workers") {
      for (const [name, s] of instances) t.ok(s.depends_on?.sandbox, `${name} waits for the sandbox`);
    }
  }
  const published = inCluster.flatMap(([, s]) => s.ports ?? []).map((p) => p.split(":")[1]);
  const singlePorts = single.flatMap(([, s]) => s.ports ?? []).map((p) => p.split(":")[1]);
  t.equal(new Set(published).size, published.length, "no two cluster services publish one host port");
  t.same(
    published.filter((p) => singlePorts.includes(p)),
    [],
    "nor one of the single-node services' (both may run)",
  );
});

t.test("`up cluster` starts exactly the cluster: every instance, and nothing of the single node", async (t) => {
  const target = services.cluster as Service;
  t.same(target.profiles, ["cluster"]);
  const reached = new Set<string>();
  const visit = (name: string) => {
    if (reached.has(name)) return;
    reached.add(name);
    for (const dep of Object.keys(services[name]?.depends_on ?? {})) visit(dep);
  };
  visit("cluster");
  for (const [name] of inCluster) t.ok(reached.has(name), `${name} is started`);
  for (const name of ["nats", "nats-setup", ...APPS]) t.notOk(reached.has(name), `${name} is not`);
  for (const name of ["postgres", "migrate", "sandbox"]) t.ok(reached.has(name), `${name} is shared`);
});

const execFileAsync = promisify(execFile);

t.test("the nodes' own command lines form a JetStream cluster that takes the topology at R3", async (t) => {
  const bin = findNatsServer();
  if (!bin) throw new Error("nats-server is needed");
  const dir = mkdtempSync(join(tmpdir(), "notify-compose-cluster-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const passwords = Object.fromEntries(ROLES.map((role) => [role, `p${randomBytes(18).toString("hex")}`])) as Record<
    Role,
    string
  >;
  const ports = await Promise.all(
    nodes.map(async () => ({ client: await freePort(), route: await freePort(), monitor: await freePort() })),
  );
  const portsOf = new Map(nodes.map(([name], i) => [name, ports[i] as (typeof ports)[number]]));
  // Compose's addresses moved to loopback: nats-2:6222 becomes 127.0.0.1:<nats-2's route port>.
  const local = (command: string[], name: string): string[] => {
    const own = portsOf.get(name) as (typeof ports)[number];
    const args = command.slice(1).map((arg, i, all) => {
      const before = all[i - 1];
      if (before === "-c") return NATS_CONF_FILE;
      if (before === "-sd") return join(dir, name);
      if (before === "-m") return String(own.monitor);
      if (before === "--cluster") return `nats://127.0.0.1:${own.route}`;
      if (before === "--routes")
        return arg.replace(
          /nats:\/\/([\w-]+):6222/g,
          (_, host: string) => `nats://127.0.0.1:${portsOf.get(host)?.route}`,
        );
      return arg;
    });
    return [...args, "-a", "127.0.0.1", "-p", String(own.client), "-l", join(dir, `${name}.log`)];
  };
  const env = {
    PATH: process.env.PATH ?? "",
    ...Object.fromEntries(ROLES.map((r) => [passwordVariable(r), passwords[r]])),
  };
  const children: ChildProcess[] = nodes.map(([name, s]) =>
    spawn(bin, local(s.command as string[], name), { stdio: "ignore", env }),
  );
  t.teardown(async () => {
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once("exit", () => resolve());
            child.kill("SIGTERM");
          }),
      ),
    );
  });
  // What compose's health check asks of each node before the setup job starts.
  for (const [name] of nodes) {
    await eventually(
      async () => {
        const response = await fetch(`http://127.0.0.1:${portsOf.get(name)?.monitor}/healthz`).catch(() => null);
        return response?.ok ? true : undefined;
      },
      30_000,
      `${name} is healthy`,
    );
  }

  const url = nodes.map(([name]) => `nats://127.0.0.1:${portsOf.get(name)?.client}`).join(",");
  const [, setupService] = inCluster.find(runs("libs/bus/dist/apply-cli.js")) as [string, Service];
  const applied = await execFileAsync(process.execPath, [join(ROOT, "libs/bus/dist/apply-cli.js")], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? "",
      ...setupService.environment,
      NATS_URL: url,
      NATS_PASSWORD: passwords.setup,
    },
  });
  t.match(applied.stdout, /created/, "the setup job created the topology");

  const bus = await connectBus({
    servers: url,
    name: "compose-cluster-check",
    role: "setup",
    user: "setup",
    password: passwords.setup,
    namespace: "",
    partitions: Number(setupService.environment?.LANE_PARTITIONS),
  });
  t.teardown(() => bus.close());
  const streams: Array<{ config: { name: string; num_replicas: number }; cluster?: { replicas?: unknown[] } }> = [];
  for await (const info of bus.jsm.streams.list()) streams.push(info);
  t.ok(streams.length >= 3 + 5, "the lanes, work, dead letters and every bucket");
  for (const info of streams) {
    t.equal(info.config.num_replicas, 3, `${info.config.name} is declared at three replicas`);
    t.equal(info.cluster?.replicas?.length, 2, `${info.config.name} has two followers beside its leader`);
  }

  // Each app's user, as compose gives it, finds what it needs.
  for (const app of APPS) {
    const [name, s] = inCluster.find(runs(`apps/${app}/dist/main.js`)) as [string, Service];
    const own = await connectBus({
      servers: url,
      name: `compose-cluster-${app}`,
      role: app,
      user: s.environment?.NATS_USER,
      password: passwords[app],
      namespace: "",
      partitions: Number(s.environment?.LANE_PARTITIONS),
    });
    await t.resolves(verifyTopology(own), `${name} sees its topology`);
    await own.close();
  }
});
