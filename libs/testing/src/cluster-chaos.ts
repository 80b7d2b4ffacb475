import { chmodSync, createWriteStream, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ClusterStack } from "@notify/devstack";
import postgres from "postgres";
import { postNotification, receivedByProviders, stackEnv } from "./embedded.js";

// The cluster chaos run: the whole service on a three-node JetStream cluster (streams and KV at
// three replicas) with two instances of every app, loaded with notifications while one NATS node
// and one instance of each app are SIGKILLed and never come back; then checked against what the
// provider sandboxes themselves received and when.

export interface ClusterChaosOptions {
  notifications: number;
  users?: number;
  /** Upstream senders at once; each sends its own users' notifications one after another. */
  concurrency?: number;
  /** Provider rates the workers must keep to together (provider=rate:burst). */
  rates?: Record<"sendgrid" | "plivo", { perSecond: number; burst: number }>;
  settleMs?: number;
  dataDir?: string;
  onProgress?: (line: string) => void;
}

export interface ClusterChaosReport {
  notifications: number;
  accepted: number;
  /** Never answered 202 by either ingest instance, within the retries. */
  refused: number;
  /** Accepted, and unknown to the database. */
  missing: number;
  notTerminal: number;
  /** Per channel: sends the database counts delivered that the provider has no record of, and repeats. */
  channels: Record<
    string,
    { expected: number; delivered: number; unsettled: number; lost: number; duplicates: number }
  >;
  /** (user, lane) pairs whose notifications were first routed out of the order they were accepted. */
  orderViolations: string[];
  /** Per provider: its limit, and the most sends any one-second window of its own clock saw. */
  /** `bound`: what the busiest second may hold at the provider (see `arrivalBound`). */
  rates: Record<string, { perSecond: number; burst: number; busiestSecond: number; bound: number }>;
  faults: Array<{ at: number; what: string }>;
  sendSeconds: number;
  recoverySeconds: number | null;
  logFile: string;
}

const LANES = ["transactional", "promotional"] as const;
const CHANNELS = ["email", "sms", "in_app"] as const;
const WAITING = ["pending", "deferred", "retrying", "parked", "sending", "sent"];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The most timestamps (ms) within any window of `windowMs`. */
/**
 * Sends leave the workers within the limit, but reach the provider after a transit time that
 * varies (event loop, sockets, a loaded machine): a send taken 150 ms before the busiest second
 * can land inside it. The provider-side bound is `burst` plus the rate over one second and the
 * transit spread allowed (200 ms). Two workers each keeping its own bucket would send twice the
 * rate, far above it.
 */
export const TRANSIT_SPREAD_MS = 200;

export function arrivalBound(limit: { perSecond: number; burst: number }): number {
  return Math.floor(limit.burst + (limit.perSecond * (1000 + TRANSIT_SPREAD_MS)) / 1000);
}

export function busiestWindow(times: number[], windowMs = 1000): number {
  const sorted = [...times].sort((a, b) => a - b);
  let best = 0;
  for (let i = 0, j = 0; j < sorted.length; j++) {
    while ((sorted[j] as number) - (sorted[i] as number) >= windowMs) i++;
    best = Math.max(best, j - i + 1);
  }
  return best;
}

export async function runClusterChaos(input: ClusterChaosOptions): Promise<ClusterChaosReport> {
  const options = {
    users: 60,
    concurrency: 24,
    settleMs: 180_000,
    rates: { sendgrid: { perSecond: 150, burst: 30 }, plivo: { perSecond: 100, burst: 20 } },
    ...input,
  };
  const say = input.onProgress ?? (() => {});
  const dataDir = input.dataDir ?? mkdtempSync(join(tmpdir(), "notify-cluster-chaos-"));
  chmodSync(dataDir, 0o755);
  const logFile = join(dataDir, "cluster-chaos.log");
  const log = createWriteStream(logFile);
  // First routing of each notification, as the processors log it: when, by whom.
  const routedAt = new Map<string, { at: number; by: string }>();
  const onLine = (source: string, line: string) => {
    log.write(`[${source}] ${line}\n`);
    if (source.startsWith("processor") && line.includes('"msg":"routed"')) {
      try {
        const entry = JSON.parse(line) as { notification_id?: string; first?: boolean; time?: string | number };
        if (entry.first && entry.notification_id)
          routedAt.set(entry.notification_id, { at: new Date(entry.time ?? 0).getTime(), by: source });
      } catch {}
    }
  };
  const faults: Array<{ at: number; what: string }> = [];
  const started = Date.now();
  const fault = (what: string) => {
    faults.push({ at: Math.round((Date.now() - started) / 100) / 10, what });
    say(`fault: ${what}`);
  };

  const rateSetting = Object.entries(options.rates)
    .map(([provider, r]) => `${provider}=${r.perSecond}:${r.burst}`)
    .join(",");
  let running: ClusterStack | undefined;
  try {
    // Loaded here, not at the top, for the same reason as startStack in stack.ts.
    const { startClusterStack } = await import("@notify/devstack");
    running = await startClusterStack({
      dataDir,
      // The processors log each routing at debug: the order check reads those lines.
      appSettings: { processor: { LOG_LEVEL: "debug" } },
      env: { PROVIDER_RATE_LIMITS: rateSetting, LEASE_TTL_SECONDS: "10" },
      onLine,
      say,
    });
    const { stack, cluster, second: extra, ingestUrls } = running;
    const pg = running.postgres;
    const sql = postgres(pg.url, { max: 2, onnotice: () => {} });
    try {
      const users = Array.from({ length: options.users }, (_, i) => `cluster-user-${i}`);
      for (const user of users) {
        await sql`insert into user_contacts (user_id, email, phone) values (${user}, ${`${user}@example.com`}, '+14155550199')
          on conflict (user_id) do nothing`;
      }
      const key = stack.apiKey as string;

      // Each sender owns some users and sends their notifications one after another, so the
      // order a user's notifications were accepted in is the order they were sent in.
      const sent: Array<{ id: string; user: string; lane: string; seq: number }> = [];
      let refused = 0;
      let next = 0;
      const seqs = new Map<string, number>();
      // A POST goes to either instance (a load balancer's pick); a refused or unanswered one is
      // tried again on the other with the same idempotency key.
      const post = (body: Record<string, unknown>): Promise<string | null> =>
        postNotification(next % 2 === 0 ? ingestUrls : [...ingestUrls].reverse(), key, body, {
          deadlineMs: 60_000,
        }).catch(() => null);
      const sendStarted = Date.now();
      const faultAt = [0.25, 0.4, 0.55].map((f) => Math.floor(f * options.notifications));
      const kill = async (k: number) => {
        if (k === faultAt[0]) {
          await cluster?.nodes[1]?.kill();
          fault("SIGKILL nats node n2 (not restarted)");
        } else if (k === faultAt[1]) {
          for (const name of ["processor", "workers"] as const) extra.get(name)?.child.kill("SIGKILL");
          fault("SIGKILL the second processor and the second worker (not restarted)");
        } else if (k === faultAt[2]) {
          for (const name of ["ingest", "receipts"] as const) extra.get(name)?.child.kill("SIGKILL");
          fault("SIGKILL the second ingest and the second receipts (not restarted)");
        }
      };
      const sender = async (lane: number) => {
        for (;;) {
          const k = next++;
          if (k >= options.notifications) return;
          await kill(k);
          // Sender `lane` owns the users whose index is lane mod concurrency.
          const owned = users.filter((_, i) => i % options.concurrency === lane);
          const user = owned[k % owned.length] as string;
          const priority = LANES[k % 3 === 0 ? 0 : 1] as string;
          const pair = `${user}/${priority}`;
          const seq = seqs.get(pair) ?? 0;
          seqs.set(pair, seq + 1);
          const id = await post({
            user_id: user,
            category: "account",
            template_id: "welcome",
            data: { name: `#${seq}` },
            priority,
            channels: [...CHANNELS],
          });
          if (id === null) refused++;
          else sent.push({ id, user, lane: priority, seq });
          if (sent.length % 1000 === 0) say(`${sent.length} accepted`);
        }
      };
      await Promise.all(Array.from({ length: Math.min(options.concurrency, users.length) }, (_, lane) => sender(lane)));
      const sendSeconds = (Date.now() - sendStarted) / 1000;
      say(`sent: ${sent.length} accepted, ${refused} refused, in ${sendSeconds.toFixed(1)} s`);

      // Settled: nothing waiting, and every email and SMS confirmed by its receipt.
      const lastFault = Date.now();
      let recoverySeconds: number | null = null;
      let waiting = Number.POSITIVE_INFINITY;
      while (Date.now() - lastFault < options.settleMs) {
        const [row] = await sql<{ n: number }[]>`
          select count(*)::int as n from notification_channels where status = any(${WAITING})`;
        const [routed] = await sql<{ n: number }[]>`
          select count(*)::int as n from notifications n
          where not exists (select 1 from notification_channels c where c.notification_id = n.id)`;
        waiting = (row?.n ?? 0) + (routed?.n ?? 0);
        if (waiting === 0) {
          recoverySeconds = (Date.now() - lastFault) / 1000;
          break;
        }
        await sleep(1000);
      }

      const ids = sent.map((s) => s.id);
      const known = new Set(
        (await sql<{ id: string }[]>`select id from notifications where id = any(${ids})`).map((r) => r.id),
      );
      const received = await receivedByProviders(dataDir);
      const statuses = await sql<{ notification_id: string; channel: string; status: string }[]>`
        select notification_id, channel, status from notification_channels where notification_id = any(${ids})`;
      const channels: ClusterChaosReport["channels"] = {};
      for (const channel of CHANNELS)
        channels[channel] = { expected: sent.length, delivered: 0, unsettled: 0, lost: 0, duplicates: 0 };
      for (const row of statuses) {
        const tally = channels[row.channel];
        if (!tally) continue;
        const count = received.get(`${row.notification_id}:${row.channel}`) ?? 0;
        if (row.status === "delivered") tally.delivered++;
        if (row.status === "unsettled") tally.unsettled++;
        if ((row.status === "delivered" || row.status === "sent") && count === 0) tally.lost++;
        if (count > 1) tally.duplicates++;
      }

      // Order: a (user, lane)'s notifications were first routed in the order they were accepted.
      const orderViolations: string[] = [];
      const byPair = new Map<string, Array<{ seq: number; id: string }>>();
      for (const s of sent) {
        const list = byPair.get(`${s.user}/${s.lane}`) ?? [];
        list.push({ seq: s.seq, id: s.id });
        byPair.set(`${s.user}/${s.lane}`, list);
      }
      const started = (ms: number) => `${((ms - sendStarted) / 1000).toFixed(2)} s`;
      for (const [pair, list] of byPair) {
        list.sort((a, b) => a.seq - b.seq);
        for (let i = 1; i < list.length; i++) {
          const earlier = list[i - 1] as { seq: number; id: string };
          const later = list[i] as { seq: number; id: string };
          const before = routedAt.get(earlier.id);
          const now = routedAt.get(later.id);
          if (before !== undefined && now !== undefined && now.at < before.at) {
            // Who routed each and when (from the start of sending), to tell a handover from a
            // delivery lost in transit; the log file has the rest.
            orderViolations.push(
              `${pair}: #${later.seq} routed before #${earlier.seq} (${later.id} by ${now.by} at ${started(now.at)}; ${earlier.id} by ${before.by} at ${started(before.at)})`,
            );
          }
        }
      }

      // Rates, from the sandboxes' own clocks.
      const env = stackEnv(dataDir);
      const times = async (url: string) =>
        ((await (await fetch(`${url}/sandbox/messages`)).json()) as { data: Array<{ received_at: string }> }).data.map(
          (m) => Date.parse(m.received_at),
        );
      const rates: ClusterChaosReport["rates"] = {
        sendgrid: {
          ...options.rates.sendgrid,
          busiestSecond: busiestWindow(await times(env.SENDGRID_SANDBOX_URL as string)),
          bound: arrivalBound(options.rates.sendgrid),
        },
        plivo: {
          ...options.rates.plivo,
          busiestSecond: busiestWindow(await times(env.PLIVO_SANDBOX_URL as string)),
          bound: arrivalBound(options.rates.plivo),
        },
      };
      return {
        notifications: options.notifications,
        accepted: sent.length,
        refused,
        missing: ids.filter((id) => !known.has(id)).length,
        notTerminal: waiting,
        channels,
        orderViolations,
        rates,
        faults,
        sendSeconds,
        recoverySeconds,
        logFile,
      };
    } finally {
      await sql.end();
    }
  } finally {
    await running?.stop();
    log.end();
  }
}

/** The report as the README shows it. */
export function formatClusterChaosReport(r: ClusterChaosReport): string {
  const lines = [
    `notifications ${r.notifications}: accepted ${r.accepted}, refused ${r.refused}, missing ${r.missing}, not terminal ${r.notTerminal}`,
    "",
    "| channel | sends | delivered | unsettled | lost | duplicates |",
    "| ------- | ----- | --------- | --------- | ---- | ---------- |",
    ...Object.entries(r.channels).map(
      ([channel, c]) =>
        `| ${channel} | ${c.expected} | ${c.delivered} | ${c.unsettled} | ${c.lost} | ${c.duplicates} |`,
    ),
    "",
    `per-user order: ${r.orderViolations.length === 0 ? "held" : `${r.orderViolations.length} violations`}`,
    ...Object.entries(r.rates).map(
      ([provider, x]) =>
        `${provider}: limit ${x.perSecond}/s (burst ${x.burst}), busiest second at the provider ${x.busiestSecond} sends (bound ${x.bound}, with ${TRANSIT_SPREAD_MS} ms of transit spread)`,
    ),
    `faults: ${r.faults.map((f) => `${f.at}s ${f.what}`).join("; ")}`,
    `sending took ${r.sendSeconds.toFixed(1)} s; all terminal ${r.recoverySeconds === null ? "never" : `${r.recoverySeconds.toFixed(1)} s`} after the last send`,
  ];
  return lines.join("\n");
}
