import { chmodSync, createWriteStream, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  APPS,
  type AppName,
  freePort,
  type LocalNats,
  type RunningPostgres,
  readPidFile,
  type Stack,
  startEmbeddedPostgres,
  startLocalNats,
  startStack,
} from "@notify/devstack";
import postgres from "postgres";
import { postNotification, receivedByProviders } from "./embedded.js";

// The chaos run: the whole service on its own PostgreSQL and nats-server, loaded with mixed
// notifications while its processes are killed and its servers restarted, then checked against
// what the provider sandboxes themselves received.

export interface ChaosOptions {
  /** Notifications to send. */
  notifications: number;
  /** SIGKILLs of each app during the run. */
  kills: number;
  restartNats: boolean;
  restartPostgres: boolean;
  /** Provider sandboxes answering 503 and answering slowly, now and then. */
  providerFaults: boolean;
  /** Some users inside quiet hours that end during the run (promotional work is deferred). */
  quietHours: boolean;
  users?: number;
  /** POSTs in flight. */
  concurrency?: number;
  /** How long to wait for every notification to be terminal after the last fault. */
  settleMs?: number;
  /** How long to wait, once every notification is terminal, for the webhook deliveries owed. */
  webhookSettleMs?: number;
  dataDir?: string;
  onProgress?: (line: string) => void;
}

export interface ChannelTally {
  expected: number;
  delivered: number;
  failed: number;
  bounced: number;
  suppressed: number;
  /** Unsettled, split by whether the provider's own records show the send. */
  unsettledReceived: number;
  unsettledNotReceived: number;
  /** Delivered, yet the provider has no record of it. */
  lost: number;
  /** The provider received the (notification, channel) more than once. */
  duplicates: number;
  waiting: number;
}

/** What a client's webhook endpoint heard of the run (the development stack's receiver). */
export interface WebhookTally {
  /**
   * Events owed: every accepted notification's acceptance, each channel's outcome, and the
   * completion of each notification whose every channel ended (none waiting or unsettled).
   */
  expected: number;
  /** Of those, received and verified at least once. */
  received: number;
  missing: number;
  /** Posts of an event already received (allowed: at least once; webhook-id tells them apart). */
  duplicates: number;
  /** Posts whose signature did not verify. */
  unsigned: number;
  /** Posts to another client's endpoint (it has no notification in the run). */
  otherClient: number;
  /** Posts received after the last fault. */
  afterLastFault: number;
  /** Of the events owed, the notifications' completions (`notification.completed`). */
  completions: CompletionTally;
  /** Deliveries still owed when the run ended (waiting or queued), and dead. */
  stillOwed: number;
  dead: number;
  /** From the last fault until no delivery was owed (null: some still were when the wait ended). */
  drainedSeconds: number | null;
}

/** What the endpoint heard of `notification.completed`: owed once per notification whose channels all ended. */
export interface CompletionTally {
  expected: number;
  /** Of those, received and verified at least once. */
  received: number;
  missing: number;
  /**
   * Completions beyond one per notification: a second `notification.completed` event (another
   * webhook-id) for one notification, or one for a notification not owed any. Never allowed; a
   * post repeated with the same webhook-id counts among the duplicates instead.
   */
  extra: number;
}

export interface ChaosReport {
  options: Required<Omit<ChaosOptions, "dataDir" | "onProgress">>;
  accepted: number;
  /** POSTs that never got a 202 (they were retried with their idempotency key until the end). */
  refused: number;
  /** What the last tries of the notifications never accepted were answered (at most 5). */
  refusals: string[];
  /** Accepted notifications that the database does not know. */
  missing: number;
  /** Notifications not terminal (accepted or processing) when the wait ended. */
  notTerminal: number;
  channels: Record<string, ChannelTally>;
  faults: Array<{ at: number; what: string }>;
  /** Apps that exited on their own during the run and were started again. */
  crashes: string[];
  sendSeconds: number;
  /** From the last fault until every notification was terminal (null: never within settleMs). */
  recoverySeconds: number | null;
  /** Lines of the reconciler saying it drove stalled work on. */
  reconcilerLines: string[];
  webhooks: WebhookTally;
  logFile: string;
}

const CHANNEL_SETS = [
  ["email", "sms", "push", "in_app"],
  ["email", "in_app"],
  ["sms", "push"],
  ["push", "in_app"],
  ["email"],
  ["sms"],
] as const;
const LANES = ["transactional", "promotional"] as const;
const WAITING = ["pending", "deferred", "retrying", "parked"];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** HTTPS trusting one CA (the push sandbox's self-signed one). */
async function httpsJson(method: string, url: string, ca: string, body?: unknown): Promise<unknown> {
  const { request } = await import("node:https");
  return new Promise((resolve, reject) => {
    const req = request(url, { method, ca, headers: { "content-type": "application/json" } }, (res) => {
      let text = "";
      res.on("data", (chunk) => {
        text += chunk;
      });
      res.on("end", () => resolve(text ? JSON.parse(text) : null));
    });
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

export async function runChaos(input: ChaosOptions): Promise<ChaosReport> {
  const options = {
    users: 40,
    concurrency: 32,
    settleMs: 180_000,
    webhookSettleMs: 120_000,
    ...input,
  };
  const say = input.onProgress ?? (() => {});
  const dataDir = input.dataDir ?? mkdtempSync(join(tmpdir(), "notify-chaos-"));
  chmodSync(dataDir, 0o755);
  const logFile = join(dataDir, "chaos.log");
  const log = createWriteStream(logFile);
  const reconcilerLines: string[] = [];
  const onLine = (source: string, line: string) => {
    log.write(`[${source}] ${line}\n`);
    if (line.includes("reconciler")) reconcilerLines.push(`[${source}] ${line}`);
  };

  const pgPort = await freePort();
  const natsPort = await freePort();
  let pg: RunningPostgres = await startEmbeddedPostgres({
    dataDir,
    port: pgPort,
    onLog: (line) => log.write(`[postgres] ${line}\n`),
  });
  const natsLog = join(dataDir, "nats-server.log");
  let nats: LocalNats = await startLocalNats({ dataDir, port: natsPort, logFile: natsLog });
  let stack: Stack | undefined;
  const faults: Array<{ at: number; what: string }> = [];
  const crashes: string[] = [];
  let stopping = false;
  let restarting = new Set<AppName>();
  const watchers: Array<Promise<void>> = [];

  try {
    stack = await startStack({
      dataDir,
      databaseUrl: pg.url,
      natsUrl: nats.url,
      namespace: "",
      partitions: 4,
      // Every port picked free and claimed, none derived from another.
      basePort: 0,
      logLevel: "warn",
      seed: true,
      onLine,
    });
    const running = stack;
    say(`stack up in ${dataDir}`);

    // A supervisor, as compose or systemd would be: an app that exits on its own is started again.
    const watch = (name: AppName) => {
      const proc = running.apps.get(name);
      if (!proc) return;
      watchers.push(
        proc.exited.then(async () => {
          if (stopping || restarting.has(name)) return;
          crashes.push(name);
          say(`${name} exited on its own; starting it again`);
          await sleep(500);
          if (stopping) return;
          restarting.add(name);
          // Until it is up: it may have gone down with a dependency that is still away.
          while (
            !stopping &&
            !(await running.restartApp(name).then(
              () => true,
              () => false,
            ))
          )
            await sleep(1000);
          restarting.delete(name);
          if (!stopping) watch(name);
        }),
      );
    };
    for (const name of APPS) watch(name);

    const base = running.baseUrl;
    const apiKey = running.apiKey;
    if (apiKey === null) throw new Error("the chaos stack is seeded: it has an API key");
    const auth = { authorization: `Bearer ${apiKey}` };
    const ca = readFileSync(running.pushCaFile, "utf8");
    const put = async (path: string, body: unknown) => {
      for (let tries = 0; ; tries++) {
        const response = await fetch(`${base}${path}`, {
          method: "PUT",
          headers: { ...auth, "content-type": "application/json" },
          body: JSON.stringify(body),
        }).catch(() => null);
        if (response?.ok) return;
        if (tries > 50) throw new Error(`PUT ${path}: ${response?.status} ${await response?.text()}`);
        await sleep(200);
      }
    };

    // The client's webhook endpoint on the stack's receiver, and another client's that must hear
    // nothing: every acceptance, channel outcome and completion must reach the first, signed.
    const hooks = running.sandboxes.webhooks;
    const WEBHOOK_TYPES = [
      "notification.accepted",
      "notification.completed",
      "channel.delivered",
      "channel.failed",
      "channel.bounced",
      "channel.suppressed",
      "channel.unsettled",
      "channel.expired",
    ];
    const registerHook = async (key: string, name: string) => {
      const response = await fetch(`${base}/api/v1/webhook-endpoints`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ url: `${hooks}/hooks/${name}`, event_types: WEBHOOK_TYPES }),
      });
      if (response.status !== 201)
        throw new Error(`POST /webhook-endpoints: ${response.status} ${await response.text()}`);
      const { secret } = (await response.json()) as { secret: string };
      await fetch(`${hooks}/sandbox/secrets/${name}`, {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ secrets: [secret] }),
      });
    };
    await registerHook(apiKey, "chaos");
    const otherKey = await fetch(`${base}/api/v1/keys`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ name: "another client", client_id: "chaos-other", scopes: ["webhooks"] }),
    }).then(async (r) => ((await r.json()) as { key: string }).key);
    await registerHook(otherKey, "other");

    // Users with an address, a phone and a push subscription; some inside quiet hours that end
    // a minute or two from now (promotional work for them is deferred, then released).
    const users: string[] = [];
    const now = new Date();
    const hhmm = (d: Date) => d.toISOString().slice(11, 16);
    const quietEnd = new Date(Math.ceil((now.getTime() + 60_000) / 60_000) * 60_000);
    for (let i = 0; i < options.users; i++) {
      const userId = `chaos-${i}`;
      await put(`/api/v1/users/${userId}/contacts`, {
        email: `${userId}@example.com`,
        phone: `+1415556${String(1000 + i)}`,
      });
      const { id: _id, ...subscription } = (await httpsJson(
        "POST",
        `${running.sandboxes.push}/sandbox/subscriptions`,
        ca,
      )) as Record<string, unknown>;
      const quiet = options.quietHours && i % 4 === 0;
      await put(`/api/v1/users/${userId}/preferences`, {
        device_tokens: [subscription],
        ...(quiet
          ? { quiet_hours: { start: hhmm(new Date(now.getTime() - 60_000)), end: hhmm(quietEnd), tz: "UTC" } }
          : {}),
      });
      users.push(userId);
    }

    // The faults, spread over the sending: each app killed `kills` times, NATS and PostgreSQL
    // restarted once, provider faults between them.
    const plan: Array<() => Promise<string>> = [];
    for (let k = 0; k < options.kills; k++) {
      for (const name of APPS) {
        plan.push(async () => {
          restarting.add(name);
          let signal: NodeJS.Signals = "SIGKILL";
          while (
            !(await running.restartApp(name, signal).then(
              () => true,
              () => false,
            ))
          ) {
            signal = "SIGTERM";
            await sleep(1000);
          }
          restarting.delete(name);
          watch(name);
          return `SIGKILL ${name}`;
        });
      }
    }
    if (options.restartNats) {
      plan.splice(Math.floor(plan.length / 3), 0, async () => {
        await nats.stop();
        await sleep(1000);
        nats = await startLocalNats({ dataDir, port: natsPort, logFile: natsLog });
        return "nats-server restarted";
      });
    }
    if (options.restartPostgres) {
      plan.splice(Math.floor((plan.length * 2) / 3), 0, async () => {
        // SIGQUIT: PostgreSQL's immediate shutdown, a crash as far as its data is concerned
        // (recovery from the WAL at the next start).
        const pid = readPidFile(join(dataDir, "postgres", "postmaster.pid"));
        if (pid !== null) process.kill(pid, "SIGQUIT");
        await pg.stop().catch(() => {});
        for (let i = 0; i < 100 && pid !== null && isAlive(pid); i++) await sleep(100);
        await sleep(1000);
        pg = await startEmbeddedPostgres({
          dataDir,
          port: pgPort,
          onLog: (line) => log.write(`[postgres] ${line}\n`),
        });
        return "PostgreSQL crashed (immediate shutdown) and restarted";
      });
    }
    if (options.providerFaults) {
      // Outages and slow spells of a few seconds each (by time, as a provider's are, not by
      // calls: an open breaker sends few calls, so a fault counted in calls would last minutes).
      const providerFaults: Array<[string, string, unknown]> = [
        ["sendgrid", running.sandboxes.sendgrid, { status: 503, for_ms: 4000 }],
        ["plivo", running.sandboxes.plivo, { delay_ms: 2000, for_ms: 4000 }],
        ["webpush", running.sandboxes.push, { status: 503, for_ms: 4000 }],
        ["sendgrid", running.sandboxes.sendgrid, { delay_ms: 2000, for_ms: 4000 }],
        ["plivo", running.sandboxes.plivo, { status: 500, for_ms: 4000 }],
        ["webpush", running.sandboxes.push, { status: 429, retry_after_seconds: 2, for_ms: 4000 }],
      ];
      providerFaults.forEach(([name, url, fault], i) => {
        plan.splice(Math.min(plan.length, 1 + i * 2), 0, async () => {
          if (url.startsWith("https:")) await httpsJson("POST", `${url}/sandbox/faults`, ca, fault);
          else
            await fetch(`${url}/sandbox/faults`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify(fault),
            });
          return `${name} sandbox: ${JSON.stringify(fault)}`;
        });
      });
    }

    const started = Date.now();
    const accepted: Array<{ id: string; channels: readonly string[] }> = [];
    let refused = 0;
    const refusals: string[] = [];
    let next = 0;
    const post = (i: number): Promise<string | null> =>
      postNotification(
        base,
        apiKey,
        {
          user_id: users[i % users.length],
          category: "account",
          template_id: "welcome",
          data: { name: `Ada ${i}` },
          priority: LANES[i % LANES.length],
          channels: CHANNEL_SETS[i % CHANNEL_SETS.length],
        },
        { idempotencyKey: `chaos-${started}-${i}`, deadlineMs: 120_000 },
      ).catch((error: Error) => {
        if (refusals.length < 5) refusals.push(error.message);
        return null;
      });
    const sender = async () => {
      while (next < options.notifications) {
        const i = next++;
        const id = await post(i);
        if (id) accepted.push({ id, channels: CHANNEL_SETS[i % CHANNEL_SETS.length] as readonly string[] });
        else refused++;
      }
    };
    const sending = Promise.all(Array.from({ length: options.concurrency }, sender));
    const faulting = (async () => {
      for (const [index, fault] of plan.entries()) {
        const due = Math.floor(((index + 1) / (plan.length + 1)) * options.notifications);
        while (accepted.length + refused < due && next < options.notifications) await sleep(100);
        const what = await fault();
        faults.push({ at: Date.now(), what });
        say(`${((Date.now() - started) / 1000).toFixed(1)} s, ${accepted.length} accepted: ${what}`);
      }
    })();
    await Promise.all([sending, faulting]);
    const sendSeconds = (Date.now() - started) / 1000;
    say(`sent: ${accepted.length} accepted in ${sendSeconds.toFixed(0)} s; waiting for every one to be terminal`);

    // Every notification terminal: no channel waiting, and routed (a channel row exists).
    const lastFault = faults.at(-1)?.at ?? started;
    const ids = accepted.map((a) => a.id);
    const db = postgres(pg.url, { max: 2, onnotice: () => {} });
    let open = ids.length;
    let recoverySeconds: number | null = null;
    try {
      const deadline = Date.now() + options.settleMs;
      while (Date.now() < deadline) {
        open = await countOpen(db, ids).catch(() => open);
        if (open === 0) {
          recoverySeconds = (Date.now() - lastFault) / 1000;
          break;
        }
        await sleep(1000);
      }
      // Receipts settle unsettled email and SMS a little later: give them their retries.
      await sleep(5000);
      const received = await receivedByProviders(dataDir);
      const rows = await db<{ notification_id: string; channel: string; status: string }[]>`
        select notification_id, channel, status from notification_channels where notification_id = any(${ids})`;
      const known = await db<{ id: string }[]>`select id from notifications where id = any(${ids})`;
      const channels: Record<string, ChannelTally> = {};
      const byKey = new Map(rows.map((r) => [`${r.notification_id}:${r.channel}`, r.status]));
      for (const { id, channels: requested } of accepted) {
        for (const channel of requested) {
          channels[channel] ??= {
            expected: 0,
            delivered: 0,
            failed: 0,
            bounced: 0,
            suppressed: 0,
            unsettledReceived: 0,
            unsettledNotReceived: 0,
            lost: 0,
            duplicates: 0,
            waiting: 0,
          };
          const tally = channels[channel] as ChannelTally;
          tally.expected++;
          const status = byKey.get(`${id}:${channel}`);
          const times = received.get(`${id}:${channel}`) ?? 0;
          if (times > 1) tally.duplicates++;
          if (status === "delivered") {
            tally.delivered++;
            if (times === 0) tally.lost++;
          } else if (status === "failed") tally.failed++;
          else if (status === "bounced") tally.bounced++;
          else if (status === "suppressed") tally.suppressed++;
          else if (status === "unsettled") {
            if (times > 0) tally.unsettledReceived++;
            else tally.unsettledNotReceived++;
          } else tally.waiting++;
        }
      }
      // Webhook posts follow the statuses, a backlog behind them under load; a post cut by a
      // kill is sent again. The wait ends when nothing is owed (no delivery, and no completion
      // check the dispatcher has yet to turn into an event), or `webhookSettleMs` after every
      // notification was terminal.
      let drainedSeconds: number | null = null;
      const webhookDeadline = Date.now() + options.webhookSettleMs;
      for (let round = 0; Date.now() < webhookDeadline; round++) {
        const [owed] = await db<{ n: number }[]>`
          select ((select count(*) from webhook_deliveries where status in ('waiting', 'queued'))
            + (select count(*) from webhook_completion_checks))::int as n`.catch(() => [{ n: -1 }]);
        if (owed?.n === 0) {
          drainedSeconds = (Date.now() - lastFault) / 1000;
          break;
        }
        if (round % 15 === 0) say(`${owed?.n} webhook deliveries owed`);
        await sleep(1000);
      }
      const webhooks = { ...(await tallyWebhooks(db, hooks, ids, lastFault)), drainedSeconds };
      return {
        options: {
          notifications: options.notifications,
          kills: options.kills,
          restartNats: options.restartNats,
          restartPostgres: options.restartPostgres,
          providerFaults: options.providerFaults,
          quietHours: options.quietHours,
          users: options.users,
          concurrency: options.concurrency,
          settleMs: options.settleMs,
          webhookSettleMs: options.webhookSettleMs,
        },
        accepted: accepted.length,
        refused,
        refusals,
        missing: ids.length - known.length,
        notTerminal: open,
        channels,
        faults: faults.map((f) => ({ at: (f.at - started) / 1000, what: f.what })),
        crashes,
        sendSeconds,
        recoverySeconds,
        reconcilerLines,
        webhooks,
        logFile,
      };
    } finally {
      await db.end({ timeout: 5 });
    }
  } finally {
    stopping = true;
    restarting = new Set(APPS);
    await stack?.stop().catch(() => {});
    await Promise.allSettled(watchers);
    await nats.stop().catch(() => {});
    await pg.stop().catch(() => {});
    await new Promise((resolve) => log.end(resolve));
    if (input.dataDir === undefined && process.env.CHAOS_KEEP !== "1") {
      // The log stays for a look when the run went wrong; the rest (clusters, stores) goes.
      rmSync(join(dataDir, "postgres"), { recursive: true, force: true });
      rmSync(join(dataDir, "nats"), { recursive: true, force: true });
    }
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Accepted notifications not yet terminal: not routed yet, or a channel still waiting. */
async function countOpen(db: postgres.Sql, ids: readonly string[]): Promise<number> {
  const [row] = await db<{ open: number }[]>`
    select count(*)::int as open from notifications n
    where n.id = any(${ids as string[]})
      and (not exists (select 1 from notification_channels c where c.notification_id = n.id)
        or exists (select 1 from notification_channels c where c.notification_id = n.id and c.status = any(${WAITING})))`;
  return row?.open ?? ids.length;
}

/** A channel's statuses that end it: its outcome is known and the notification may complete. */
const ENDED = new Set(["delivered", "failed", "bounced", "suppressed", "expired"]);
/** The statuses that are a `channel.*` event. */
const OUTCOMES = new Set([...ENDED, "unsettled"]);

/** An event owed, as the tally keys it: notification, type, and channel (none for a notification's own). */
const eventKey = (notificationId: string, type: string, channel = "") => `${notificationId}:${type}:${channel}`;

/**
 * The events the client's endpoint is owed for the notifications the database knows, from their
 * channels' statuses after the run: each one's acceptance, each channel's outcome (a bounced
 * channel was delivered first: both), and one completion for each notification whose channels
 * all ended (at least one, none waiting or unsettled).
 */
export function webhookEventsOwed(
  known: readonly string[],
  channels: ReadonlyArray<{ notification_id: string; channel: string; status: string }>,
): Set<string> {
  const owed = new Set<string>();
  const ended = new Map<string, boolean>();
  for (const id of known) owed.add(eventKey(id, "notification.accepted"));
  for (const c of channels) {
    if (OUTCOMES.has(c.status)) owed.add(eventKey(c.notification_id, `channel.${c.status}`, c.channel));
    if (c.status === "bounced") owed.add(eventKey(c.notification_id, "channel.delivered", c.channel));
    ended.set(c.notification_id, (ended.get(c.notification_id) ?? true) && ENDED.has(c.status));
  }
  const knownIds = new Set(known);
  for (const [id, allEnded] of ended) {
    if (allEnded && knownIds.has(id)) owed.add(eventKey(id, "notification.completed"));
  }
  return owed;
}

/** One post the receiver lists (`GET /sandbox/received?compact=1`). */
export interface ReceivedPost {
  name: string;
  webhook_id: string | null;
  verified: boolean;
  received_at: string;
  body: unknown;
}

/**
 * What the client's endpoint (`chaos`) was owed against the posts the receiver verified, by
 * (notification, type, channel); posts to the other client's endpoint (`other`) count against it.
 */
export function tallyWebhookPosts(
  owed: ReadonlySet<string>,
  posts: readonly ReceivedPost[],
  lastFault: number,
): Omit<WebhookTally, "drainedSeconds" | "stillOwed" | "dead"> {
  const seen = new Set<string>();
  const webhookIds = new Set<string>();
  // Each notification's completion events, by webhook-id: one is owed, a second never is.
  const completions = new Map<string, Set<string | null>>();
  let duplicates = 0;
  let unsigned = 0;
  let otherClient = 0;
  let afterLastFault = 0;
  for (const post of posts) {
    if (post.name === "other") otherClient++;
    if (post.name !== "chaos") continue;
    if (!post.verified) {
      unsigned++;
      continue;
    }
    if (Date.parse(post.received_at) > lastFault) afterLastFault++;
    if (post.webhook_id !== null && webhookIds.has(post.webhook_id)) duplicates++;
    if (post.webhook_id !== null) webhookIds.add(post.webhook_id);
    const body = post.body as { type?: string; data?: { notification_id?: string; channel?: string } };
    const id = String(body.data?.notification_id);
    const type = String(body.type);
    seen.add(eventKey(id, type, type.startsWith("channel.") ? body.data?.channel : ""));
    if (type === "notification.completed") {
      const events = completions.get(id) ?? new Set();
      events.add(post.webhook_id);
      completions.set(id, events);
    }
  }
  const owedCompletions = [...owed].filter((key) => key.endsWith(":notification.completed:"));
  const receivedCompletions = owedCompletions.filter((key) => seen.has(key)).length;
  let extra = 0;
  for (const [id, events] of completions) {
    extra += owed.has(eventKey(id, "notification.completed")) ? events.size - 1 : events.size;
  }
  const received = [...owed].filter((key) => seen.has(key)).length;
  return {
    expected: owed.size,
    received,
    missing: owed.size - received,
    duplicates,
    unsigned,
    otherClient,
    afterLastFault,
    completions: {
      expected: owedCompletions.length,
      received: receivedCompletions,
      missing: owedCompletions.length - receivedCompletions,
      extra,
    },
  };
}

/**
 * What the client's endpoint was owed (from the database, after the run) against what the
 * receiver verified, with the deliveries still owed and dead.
 */
async function tallyWebhooks(
  db: postgres.Sql,
  hooks: string,
  ids: readonly string[],
  lastFault: number,
): Promise<Omit<WebhookTally, "drainedSeconds">> {
  const known = await db<{ id: string }[]>`select id from notifications where id = any(${ids as string[]})`;
  const channels = await db<{ notification_id: string; channel: string; status: string }[]>`
    select notification_id, channel, status from notification_channels where notification_id = any(${ids as string[]})`;
  const owed = webhookEventsOwed(
    known.map((k) => k.id),
    channels,
  );
  const posts = (await (await fetch(`${hooks}/sandbox/received?compact=1`)).json()) as ReceivedPost[];
  const [states] = await db<{ owed: number; dead: number }[]>`
    select count(*) filter (where status in ('waiting', 'queued'))::int as owed,
           count(*) filter (where status = 'dead')::int as dead
    from webhook_deliveries`;
  return {
    ...tallyWebhookPosts(owed, posts, lastFault),
    stillOwed: states?.owed ?? 0,
    dead: states?.dead ?? 0,
  };
}

/** The report as a person reads it: what was done, and one table of what came of it. */
export function formatChaosReport(report: ChaosReport): string {
  const o = report.options;
  const total = (key: keyof ChannelTally) => Object.values(report.channels).reduce((sum, t) => sum + t[key], 0);
  const lines = [
    `chaos: ${o.notifications} notifications to ${o.users} users, mixed channels and lanes${o.quietHours ? ", quiet hours" : ""}${o.providerFaults ? ", provider faults and slow providers" : ""}`,
    `faults: ${report.faults.length} (${report.faults.map((f) => `${f.at.toFixed(0)} s ${f.what}`).join("; ")})`,
    `apps that exited on their own and were restarted: ${report.crashes.length ? report.crashes.join(", ") : "none"}`,
    `accepted ${report.accepted} in ${report.sendSeconds.toFixed(0)} s; never accepted: ${report.refused}${report.refusals.length > 0 ? ` (${report.refusals.join("; ")})` : ""}; unknown to the database: ${report.missing}`,
    `reconciler: ${report.reconcilerLines.length} round(s) drove stalled work on`,
    "",
    "| channel | sends | delivered | failed | suppressed | unsettled (provider has it / has not) | lost | duplicates | not terminal |",
    "| ------- | ----- | --------- | ------ | ---------- | ------------------------------------- | ---- | ---------- | ------------ |",
    ...Object.entries(report.channels)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(
        ([channel, t]) =>
          `| ${channel} | ${t.expected} | ${t.delivered} | ${t.failed + t.bounced} | ${t.suppressed} | ${t.unsettledReceived + t.unsettledNotReceived} (${t.unsettledReceived} / ${t.unsettledNotReceived}) | ${t.lost} | ${t.duplicates} | ${t.waiting} |`,
      ),
    `| all | ${total("expected")} | ${total("delivered")} | ${total("failed") + total("bounced")} | ${total("suppressed")} | ${total("unsettledReceived") + total("unsettledNotReceived")} (${total("unsettledReceived")} / ${total("unsettledNotReceived")}) | ${total("lost")} | ${total("duplicates")} | ${total("waiting")} |`,
    "",
    "| webhook events | expected | received | missing | duplicates | unsigned | to another client | received after the last fault | still owed / dead |",
    "| -------------- | -------- | -------- | ------- | ---------- | -------- | ----------------- | ----------------------------- | ----------------- |",
    `| client endpoint | ${report.webhooks.expected} | ${report.webhooks.received} | ${report.webhooks.missing} | ${report.webhooks.duplicates} | ${report.webhooks.unsigned} | ${report.webhooks.otherClient} | ${report.webhooks.afterLastFault} | ${report.webhooks.stillOwed} / ${report.webhooks.dead} |`,
    `| of which notification.completed | ${report.webhooks.completions.expected} | ${report.webhooks.completions.received} | ${report.webhooks.completions.missing} | ${report.webhooks.completions.extra} extra | | | | |`,
    "",
    report.recoverySeconds === null
      ? `NOT all terminal ${(o.settleMs / 1000).toFixed(0)} s after the last fault: ${report.notTerminal} open`
      : `every notification terminal ${report.recoverySeconds.toFixed(1)} s after the last fault`,
    report.webhooks.drainedSeconds === null
      ? `webhook deliveries NOT drained ${(o.webhookSettleMs / 1000).toFixed(0)} s after that: ${report.webhooks.stillOwed} owed`
      : `every webhook delivery made ${report.webhooks.drainedSeconds.toFixed(1)} s after the last fault`,
    `log: ${report.logFile}`,
  ];
  return lines.join("\n");
}
