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
import { getJson, getWithCa, postNotification, receivedByProviders, stackEnv } from "./embedded.js";

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
  /**
   * Scheduled notifications posted over the run besides `notifications`, each with a `send_at`
   * 3-30 s after it is posted (transactional and promotional, every channel set).
   */
  scheduled?: number;
  /**
   * Digest items posted over the run besides `notifications`: `digestUsers` users times two keys
   * (one on email and in-app, one on SMS and push), window 10 s, max_items 5.
   */
  digestItems?: number;
  digestUsers?: number;
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
  /** Some of the events missing (`<notification id>:<type>:<channel>`), at most 5. */
  missingSample: string[];
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

/** A scheduled notification the run posted and had accepted. */
export interface ScheduledSend {
  id: string;
  channels: readonly string[];
  /** Its send_at, in ms. */
  sendAt: number;
}

/** A scheduled notification's channel after the run, with its first signs of sending. */
export interface ScheduledChannelRow {
  notification_id: string;
  channel: string;
  status: string;
  /** The first delivery attempt's time. */
  first_attempt: Date | null;
  /**
   * When it first took a status of sending (any but deferred, suppressed, canceled, expired): a
   * routing that queued it at once (`routed_status` pending), or a later move. A release leaves
   * the channel deferred until its worker moves it on, so its attempts and receipts tell then.
   */
  first_sending: Date | null;
}

/** What came of the scheduled notifications, by send (one notification's channel). */
export interface ScheduledTally {
  /** Scheduled notifications accepted, and those never accepted. */
  notifications: number;
  refused: number;
  /** Sends owed: every accepted notification's channels. */
  expected: number;
  /** Of those, received by their provider (once or more). */
  received: number;
  /** Not received, and ended unsettled: a send cut by a worker's kill (sent at most once). */
  unsettled: number;
  /** Not received otherwise: delivered yet not at the provider, failed, suppressed, or waiting. */
  missing: number;
  /** Received more than once. */
  duplicates: number;
  /**
   * Sends with any sign before their send_at: the provider's receipt, a delivery attempt, or the
   * channel taking a status of sending (pending, retrying, parked, delivered, unsettled, ...).
   */
  early: number;
  /** Channels still waiting (pending, deferred, retrying, parked) when the run ended. */
  waiting: number;
  /** Seconds from send_at to the provider's first receipt: the median and the most. */
  lagP50: number | null;
  lagMax: number | null;
}

/** A digest item the run posted and had accepted: `who` is its data, unique to it. */
export interface DigestItemPosted {
  id: string;
  who: string;
  userId: string;
  key: string;
  channels: readonly string[];
}

/** A digest of the run's keys after the run. */
export interface DigestRow {
  id: string;
  user_id: string;
  key: string;
  status: string;
  item_count: number;
  max_items: number;
  opened_at: Date;
  sent_at: Date | null;
  notification_id: string | null;
  /** When its last item joined. */
  last_joined_at: Date | null;
}

/** A digest's own notification (`digest_of`), with the data it was rendered from. */
export interface DigestNotificationRow {
  id: string;
  digest_of: string;
  data: { items?: Array<{ who?: unknown }>; count?: unknown; omitted?: unknown } | null;
}

/** Sends of one kind, counted as the scheduled ones are. */
export interface SendTally {
  expected: number;
  received: number;
  unsettled: number;
  missing: number;
  duplicates: number;
  waiting: number;
}

/** What came of the digest items: each must be listed once, in the sent digest it joined. */
export interface DigestTally {
  /** Items accepted, and those never accepted. */
  items: number;
  refused: number;
  /** Items listed once, in the data of the notification of the one digest they joined, sent. */
  sent: number;
  /** Items listed in no notification of the digest they joined (or it was not sent). */
  missing: number;
  /** Listings beyond one per item, over every digest notification. */
  duplicates: number;
  /** Listings in a digest the item did not join, of another user or key, or of no item posted. */
  misplaced: number;
  /** Items that joined no digest, or one not sent when the run ended. */
  notSent: number;
  /** Digests sent: all, those that filled up (max_items), those whose window ended. */
  digests: number;
  full: number;
  byWindow: number;
  /** Digests with more than one notification, or whose row names another than the one made. */
  sentTwice: number;
  /** Digests sent before they filled up or their window ended, or before an item of theirs joined. */
  early: number;
  /**
   * Digest notifications whose data disagrees with the digest (count, omitted) or whose in-app
   * body does not list the data's items in order (the template's loop over it.items).
   */
  inconsistent: number;
  /** The digest notifications' sends. */
  sends: SendTally;
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
  /** The scheduled notifications (null: the run posted none). */
  scheduled: ScheduledTally | null;
  /** The digest items and their digests (null: the run posted none). */
  digests: DigestTally | null;
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
/** The digest items' template, keys (each with its channels), window and size. */
const DIGEST_TEMPLATE = "chaos-digest";
const DIGEST_KEYS = ["comments", "likes"] as const;
const DIGEST_CHANNELS = [
  ["email", "in_app"],
  ["sms", "push"],
] as const;
const DIGEST_WINDOW = "10s";
const DIGEST_WINDOW_MS = 10_000;
const DIGEST_MAX_ITEMS = 5;

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
    scheduled: 0,
    digestItems: 0,
    digestUsers: 4,
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

    // The digests' template: the items in accept order, and their count.
    if (options.digestItems > 0) {
      const list = "<% for (const c of it.items) { %><%= c.who %> <% } %>";
      await put(`/api/v1/templates/${DIGEST_TEMPLATE}`, {
        params: ["who"],
        variants: [
          { channel: "email", locale: "en", subject: "<%= it.count %> new", body_template: `<p>${list}</p>` },
          { channel: "sms", locale: "en", body_template: `<%= it.count %> new: ${list}` },
          { channel: "push", locale: "en", subject: "<%= it.count %> new", body_template: list },
          { channel: "in_app", locale: "en", subject: "<%= it.count %> new", body_template: list },
        ],
      });
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

    // Time-held traffic beside it, posted as the sending goes on so that it is held, comes due
    // and closes while the faults happen: scheduled notifications (send_at 3-30 s after each is
    // posted; over the first 80 % of the sending) and digest items (`digestUsers` users times two
    // keys, window 10 s, max_items 5; over the first 90 %), each with an idempotency key of its own.
    const scheduled: ScheduledSend[] = [];
    const items: DigestItemPosted[] = [];
    let scheduledRefused = 0;
    let itemsRefused = 0;
    const digestUsers = users.slice(0, options.digestUsers);
    const held: Array<{ at: number; post: () => Promise<void> }> = [];
    const refusedWith = (error: Error) => {
      if (refusals.length < 5) refusals.push(error.message);
      return null;
    };
    for (let j = 0; j < options.scheduled; j++) {
      const channels = CHANNEL_SETS[j % CHANNEL_SETS.length] as readonly string[];
      held.push({
        at: (j / options.scheduled) * 0.8 * options.notifications,
        post: async () => {
          const sendAt = new Date(Date.now() + (3 + ((j * 11) % 28)) * 1000).toISOString();
          const id = await postNotification(
            base,
            apiKey,
            {
              // Users of odd index, as the promotional notifications above: none in quiet hours.
              user_id: users[(j * 2 + 1) % users.length],
              category: "account",
              template_id: "welcome",
              data: { name: `Later ${j}` },
              priority: LANES[Math.floor(j / CHANNEL_SETS.length) % LANES.length],
              channels,
              send_at: sendAt,
            },
            { idempotencyKey: `chaos-${started}-scheduled-${j}`, deadlineMs: 120_000 },
          ).catch(refusedWith);
          if (id) scheduled.push({ id, channels, sendAt: Date.parse(sendAt) });
          else scheduledRefused++;
        },
      });
    }
    for (let j = 0; j < options.digestItems && digestUsers.length > 0; j++) {
      const pair = j % (digestUsers.length * DIGEST_KEYS.length);
      const userId = digestUsers[pair % digestUsers.length] as string;
      const k = Math.floor(pair / digestUsers.length);
      const key = DIGEST_KEYS[k] as string;
      const channels = DIGEST_CHANNELS[k] as readonly string[];
      const who = `d${j}`;
      held.push({
        at: (j / options.digestItems) * 0.9 * options.notifications,
        post: async () => {
          const id = await postNotification(
            base,
            apiKey,
            {
              user_id: userId,
              category: "account",
              template_id: DIGEST_TEMPLATE,
              data: { who },
              priority: "transactional",
              channels,
              digest: { key, window: DIGEST_WINDOW, max_items: DIGEST_MAX_ITEMS },
            },
            { idempotencyKey: `chaos-${started}-digest-${j}`, deadlineMs: 120_000 },
          ).catch(refusedWith);
          if (id) items.push({ id, who, userId, key, channels });
          else itemsRefused++;
        },
      });
    }
    held.sort((a, b) => a.at - b.at);
    let nextHeld = 0;
    const heldSender = async () => {
      while (nextHeld < held.length) {
        const task = held[nextHeld++] as (typeof held)[number];
        while (accepted.length + refused < task.at && next < options.notifications) await sleep(50);
        await task.post();
      }
    };
    const holding = Promise.all(Array.from({ length: Math.min(4, held.length) }, heldSender));
    const faulting = (async () => {
      for (const [index, fault] of plan.entries()) {
        const due = Math.floor(((index + 1) / (plan.length + 1)) * options.notifications);
        while (accepted.length + refused < due && next < options.notifications) await sleep(100);
        const what = await fault();
        faults.push({ at: Date.now(), what });
        say(`${((Date.now() - started) / 1000).toFixed(1)} s, ${accepted.length} accepted: ${what}`);
      }
    })();
    await Promise.all([sending, faulting, holding]);
    const sendSeconds = (Date.now() - started) / 1000;
    say(
      `sent: ${accepted.length} accepted, and ${scheduled.length} scheduled and ${items.length} digest items, in ${sendSeconds.toFixed(0)} s; waiting for every one to be terminal`,
    );

    // Every notification terminal: no channel waiting, and routed (a channel row exists); every
    // digest item in a sent digest, whose notification is terminal too.
    const lastFault = faults.at(-1)?.at ?? started;
    const ids = accepted.map((a) => a.id);
    const scheduledIds = scheduled.map((s) => s.id);
    const itemIds = items.map((i) => i.id);
    const db = postgres(pg.url, { max: 2, onnotice: () => {} });
    let open = ids.length + scheduledIds.length + itemIds.length;
    let recoverySeconds: number | null = null;
    try {
      const deadline = Date.now() + options.settleMs;
      while (Date.now() < deadline) {
        open = await Promise.all([countOpen(db, [...ids, ...scheduledIds]), countOpenDigests(db, itemIds)])
          .then(([a, b]) => a + b)
          .catch(() => open);
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
      const known = await db<{ id: string }[]>`
        select id from notifications where id = any(${[...ids, ...scheduledIds, ...itemIds]})`;
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
      const scheduledTally =
        options.scheduled > 0 ? await tallyScheduledRun(db, dataDir, scheduled, scheduledRefused) : null;
      const digestRecords = options.digestItems > 0 ? await digestRecordsOf(db, dataDir, items) : null;
      const digestTally =
        digestRecords === null ? null : tallyDigests(items, itemsRefused, DIGEST_WINDOW_MS, digestRecords);
      // The client's endpoint is owed the events of the scheduled notifications, the digest items
      // (their acceptance) and the digests' notifications as of any other.
      const webhookIds = [
        ...ids,
        ...scheduledIds,
        ...itemIds,
        ...(digestRecords?.notifications ?? []).map((n) => n.id),
      ];
      const webhooks = { ...(await tallyWebhooks(db, hooks, webhookIds, lastFault)), drainedSeconds };
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
          scheduled: options.scheduled,
          digestItems: options.digestItems,
          digestUsers: options.digestUsers,
        },
        accepted: accepted.length,
        refused,
        refusals,
        missing: ids.length + scheduledIds.length + itemIds.length - known.length,
        notTerminal: open,
        channels,
        faults: faults.map((f) => ({ at: (f.at - started) / 1000, what: f.what })),
        crashes,
        sendSeconds,
        recoverySeconds,
        reconcilerLines,
        webhooks,
        scheduled: scheduledTally,
        digests: digestTally,
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

/**
 * Digest items not yet in a sent digest, and the digests' notifications not yet terminal (not
 * routed yet, or a channel still waiting).
 */
async function countOpenDigests(db: postgres.Sql, itemIds: readonly string[]): Promise<number> {
  if (itemIds.length === 0) return 0;
  const [row] = await db<{ open: number }[]>`
    select (
      (select count(*) from unnest(${itemIds as string[]}::text[]) as x(id)
        where not exists (select 1 from digest_items i join digests d on d.id = i.digest_id
                          where i.notification_id = x.id and d.status = 'sent'))
      + (select count(*) from notifications n
          where n.digest_of in (select digest_id from digest_items where notification_id = any(${itemIds as string[]}))
            and (not exists (select 1 from notification_channels c where c.notification_id = n.id)
              or exists (select 1 from notification_channels c where c.notification_id = n.id and c.status = any(${WAITING}))))
    )::int as open`;
  return row?.open ?? itemIds.length;
}

/**
 * When the providers received each (notification, channel) of `ids`, in ms, keyed
 * `<notification id>:<channel>`: from the sandboxes' own records (as receivedByProviders reads
 * them, with their receipt times) and, for in-app, the inbox item's creation.
 */
async function receiptTimes(dataDir: string, db: postgres.Sql, ids: readonly string[]): Promise<Map<string, number[]>> {
  const env = stackEnv(dataDir);
  const wanted = new Set(ids);
  const times = new Map<string, number[]>();
  const add = (id: string | null | undefined, channel: string, at: string | Date) => {
    if (!id || !wanted.has(id)) return;
    const key = `${id}:${channel}`;
    times.set(key, [...(times.get(key) ?? []), new Date(at).getTime()]);
  };
  const sendgrid = await getJson<{ data: Array<{ custom_args: Record<string, string>; received_at: string }> }>(
    `${env.SENDGRID_SANDBOX_URL}/sandbox/messages`,
  );
  for (const mail of sendgrid.data) add(mail.custom_args.notification_id, "email", mail.received_at);
  if (env.SMTP_SANDBOX_URL) {
    const smtp = await getJson<{ data: Array<{ notification_id: string | null; received_at: string }> }>(
      `${env.SMTP_SANDBOX_URL}/sandbox/messages`,
    );
    for (const mail of smtp.data) add(mail.notification_id, "email", mail.received_at);
  }
  const plivo = await getJson<{ data: Array<{ url: string | null; received_at: string }> }>(
    `${env.PLIVO_SANDBOX_URL}/sandbox/messages`,
  );
  for (const sms of plivo.data)
    add(sms.url ? new URL(sms.url).searchParams.get("notification_id") : null, "sms", sms.received_at);
  const push = (await getWithCa(
    `${env.PUSH_SANDBOX_URL}/sandbox/messages`,
    readFileSync(env.PUSH_SANDBOX_CA as string, "utf8"),
  )) as { data: Array<{ payload: string; received_at: string }> };
  for (const message of push.data) {
    add((JSON.parse(message.payload) as { notification_id?: string }).notification_id, "push", message.received_at);
  }
  for (const row of await db<{ notification_id: string; created_at: Date }[]>`
    select notification_id, created_at from inbox_items where notification_id = any(${ids as string[]})`) {
    add(row.notification_id, "in_app", row.created_at);
  }
  return times;
}

/** The scheduled notifications' sends after the run (tallyScheduled), from the database and the providers. */
async function tallyScheduledRun(
  db: postgres.Sql,
  dataDir: string,
  sends: readonly ScheduledSend[],
  refused: number,
): Promise<ScheduledTally> {
  const ids = sends.map((s) => s.id);
  const rows = await db<ScheduledChannelRow[]>`
    select c.notification_id, c.channel, c.status,
      (select min(a.at) from delivery_attempts a
        where a.notification_id = c.notification_id and a.channel = c.channel) as first_attempt,
      least(
        (select min(e.at) from channel_status_events e
          where e.notification_id = c.notification_id and e.channel = c.channel
            and e.status <> all(${NOT_SENDING})),
        case when c.routed_status = 'pending' then c.routed_at end) as first_sending
    from notification_channels c where c.notification_id = any(${ids})`;
  return tallyScheduled(sends, refused, rows, await receiptTimes(dataDir, db, ids));
}

/** The run's digests, their notifications, channels and in-app bodies, and the providers' receipts of them. */
async function digestRecordsOf(
  db: postgres.Sql,
  dataDir: string,
  items: readonly DigestItemPosted[],
): Promise<DigestRecords> {
  const itemIds = items.map((i) => i.id);
  const users = [...new Set(items.map((i) => i.userId))];
  const joined = await db<{ notification_id: string; digest_id: string }[]>`
    select notification_id, digest_id from digest_items where notification_id = any(${itemIds})`;
  const digests = await db<DigestRow[]>`
    select d.id, d.user_id, d.key, d.status, d.item_count, d.max_items, d.opened_at, d.sent_at, d.notification_id,
      (select max(i.joined_at) from digest_items i where i.digest_id = d.id) as last_joined_at
    from digests d where d.user_id = any(${users}) and d.template_id = ${DIGEST_TEMPLATE}`;
  const notifications = await db<DigestNotificationRow[]>`
    select id, digest_of, data from notifications where digest_of = any(${digests.map((d) => d.id)})`;
  const made = notifications.map((n) => n.id);
  const channels = await db<{ notification_id: string; channel: string; status: string }[]>`
    select notification_id, channel, status from notification_channels where notification_id = any(${made})`;
  const inbox = await db<{ notification_id: string; body: string }[]>`
    select notification_id, body from inbox_items where notification_id = any(${made})`;
  return { joined, digests, notifications, channels, inbox, receipts: await receiptTimes(dataDir, db, made) };
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
    missingSample: [...owed].filter((key) => !seen.has(key)).slice(0, 5),
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

/** Statuses of a channel that mean it was (being) sent: any but these. */
const NOT_SENDING = ["deferred", "suppressed", "canceled", "expired"];

/** The percentile `p` (0-1) of sorted values, or null for none. */
const percentile = (sorted: readonly number[], p: number): number | null =>
  sorted.length === 0 ? null : (sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] as number);

/** One send's provider record against its channel's status, into `tally`. */
function countSend(tally: SendTally, status: string | undefined, times: readonly number[]): void {
  tally.expected++;
  if (times.length > 0) tally.received++;
  if (times.length > 1) tally.duplicates++;
  if (times.length === 0) {
    if (status === "unsettled") tally.unsettled++;
    else tally.missing++;
  }
  if (status === undefined || WAITING.includes(status)) tally.waiting++;
}

/**
 * The scheduled notifications' sends: each received by its provider once, and nothing of it
 * before its send_at (no receipt, no attempt, no status of sending). `receipts` holds each
 * (notification, channel)'s receipt times in ms, keyed `<id>:<channel>`.
 */
export function tallyScheduled(
  sends: readonly ScheduledSend[],
  refused: number,
  rows: readonly ScheduledChannelRow[],
  receipts: ReadonlyMap<string, readonly number[]>,
): ScheduledTally {
  const byKey = new Map(rows.map((r) => [`${r.notification_id}:${r.channel}`, r]));
  const tally: SendTally = { expected: 0, received: 0, unsettled: 0, missing: 0, duplicates: 0, waiting: 0 };
  const lags: number[] = [];
  let early = 0;
  for (const send of sends) {
    for (const channel of send.channels) {
      const key = `${send.id}:${channel}`;
      const row = byKey.get(key);
      const times = receipts.get(key) ?? [];
      countSend(tally, row?.status, times);
      const first = times.length > 0 ? Math.min(...times) : null;
      if (first !== null) lags.push((first - send.sendAt) / 1000);
      if (
        (first !== null && first < send.sendAt) ||
        (row?.first_attempt != null && row.first_attempt.getTime() < send.sendAt) ||
        (row?.first_sending != null && row.first_sending.getTime() < send.sendAt)
      )
        early++;
    }
  }
  lags.sort((a, b) => a - b);
  return {
    notifications: sends.length,
    refused,
    ...tally,
    early,
    lagP50: percentile(lags, 0.5),
    lagMax: lags.at(-1) ?? null,
  };
}

/** What the database and the providers hold of the run's digests, for tallyDigests. */
export interface DigestRecords {
  /** Each item's digest (digest_items). */
  joined: ReadonlyArray<{ notification_id: string; digest_id: string }>;
  /** Every digest of the run's users and digest template. */
  digests: readonly DigestRow[];
  /** Every notification whose digest_of is one of them. */
  notifications: readonly DigestNotificationRow[];
  /** Those notifications' channels. */
  channels: ReadonlyArray<{ notification_id: string; channel: string; status: string }>;
  /** Their in-app inbox items. */
  inbox: ReadonlyArray<{ notification_id: string; body: string }>;
  /** Receipt times by `<notification id>:<channel>`. */
  receipts: ReadonlyMap<string, readonly number[]>;
}

/**
 * The digest items against their digests: every item in exactly one digest, sent, whose one
 * notification lists it once (and no item of another digest, user or key); each digest sent once,
 * not before it filled up or its window ended; its notification received once per channel by the
 * provider, its in-app body listing its items.
 */
export function tallyDigests(
  items: readonly DigestItemPosted[],
  refused: number,
  windowMs: number,
  records: DigestRecords,
): DigestTally {
  const byWho = new Map(items.map((i) => [i.who, i]));
  const joinedTo = new Map(records.joined.map((j) => [j.notification_id, j.digest_id]));
  const digestById = new Map(records.digests.map((d) => [d.id, d]));
  const made = new Map<string, DigestNotificationRow[]>();
  for (const n of records.notifications) made.set(n.digest_of, [...(made.get(n.digest_of) ?? []), n]);
  const channelsOf = new Map<string, Map<string, string>>();
  for (const c of records.channels) {
    const channels = channelsOf.get(c.notification_id) ?? new Map<string, string>();
    channels.set(c.channel, c.status);
    channelsOf.set(c.notification_id, channels);
  }
  const inbox = new Map(records.inbox.map((i) => [i.notification_id, i.body]));
  const channelsOfKey = new Map(items.map((i) => [`${i.userId}:${i.key}`, i.channels]));

  // Where each item is listed: by the notifications whose data names it.
  const listedIn = new Map<string, string[]>();
  let misplaced = 0;
  let inconsistent = 0;
  const sends: SendTally = { expected: 0, received: 0, unsettled: 0, missing: 0, duplicates: 0, waiting: 0 };
  for (const n of records.notifications) {
    const digest = digestById.get(n.digest_of);
    const listed = (n.data?.items ?? []).map((entry) => String(entry?.who));
    for (const who of listed) {
      listedIn.set(who, [...(listedIn.get(who) ?? []), n.id]);
      const item = byWho.get(who);
      if (
        !item ||
        !digest ||
        item.userId !== digest.user_id ||
        item.key !== digest.key ||
        joinedTo.get(item.id) !== digest.id
      )
        misplaced++;
    }
    const body = inbox.get(n.id);
    if (
      n.data?.count !== digest?.item_count ||
      n.data?.omitted !== 0 ||
      (body !== undefined && body.trim().split(/\s+/).join(" ") !== listed.join(" "))
    )
      inconsistent++;
    const channels = digest ? (channelsOfKey.get(`${digest.user_id}:${digest.key}`) ?? []) : [];
    for (const channel of channels) {
      countSend(sends, channelsOf.get(n.id)?.get(channel), records.receipts.get(`${n.id}:${channel}`) ?? []);
    }
  }

  let sent = 0;
  let missing = 0;
  let duplicates = 0;
  let notSent = 0;
  for (const item of items) {
    const listings = listedIn.get(item.who) ?? [];
    if (listings.length > 1) duplicates += listings.length - 1;
    const digest = digestById.get(joinedTo.get(item.id) ?? "");
    const isSent = digest?.status === "sent" && digest.notification_id !== null;
    if (!isSent) notSent++;
    if (isSent && listings.includes(digest.notification_id as string)) sent++;
    else missing++;
  }

  let digests = 0;
  let full = 0;
  let sentTwice = 0;
  let early = 0;
  for (const digest of records.digests) {
    const notifications = made.get(digest.id) ?? [];
    if (notifications.length > 1 || (notifications[0] && notifications[0].id !== digest.notification_id)) sentTwice++;
    if (digest.status !== "sent" || digest.sent_at === null) continue;
    digests++;
    const filled = digest.item_count >= digest.max_items;
    if (filled) full++;
    const sentAt = digest.sent_at.getTime();
    if (
      (digest.last_joined_at !== null && sentAt < digest.last_joined_at.getTime()) ||
      (!filled && sentAt < digest.opened_at.getTime() + windowMs)
    )
      early++;
  }
  return {
    items: items.length,
    refused,
    sent,
    missing,
    duplicates: duplicates,
    misplaced,
    notSent,
    digests,
    full,
    byWindow: digests - full,
    sentTwice,
    early,
    inconsistent,
    sends,
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
    ...(report.webhooks.missingSample.length > 0
      ? [`webhook events missing, for example: ${report.webhooks.missingSample.join(", ")}`]
      : []),
    ...heldRows(report),
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

/** The table of the scheduled notifications and the digests, and what it does not show. */
function heldRows(report: ChaosReport): string[] {
  const s = report.scheduled;
  const d = report.digests;
  if (s === null && d === null) return [];
  const seconds = (value: number | null) => (value === null ? "-" : `${value.toFixed(1)} s`);
  return [
    "",
    "| scheduled and digests | expected | received | missing | duplicates | early | unsettled (provider has not) | not terminal |",
    "| --------------------- | -------- | -------- | ------- | ---------- | ----- | ---------------------------- | ------------ |",
    ...(s === null
      ? []
      : [
          `| scheduled sends | ${s.expected} | ${s.received} | ${s.missing} | ${s.duplicates} | ${s.early} | ${s.unsettled} | ${s.waiting} |`,
        ]),
    ...(d === null
      ? []
      : [
          `| digest items | ${d.items} | ${d.sent} | ${d.missing} | ${d.duplicates} | ${d.early} (digests) | | ${d.notSent} |`,
          `| digest sends | ${d.sends.expected} | ${d.sends.received} | ${d.sends.missing} | ${d.sends.duplicates} | | ${d.sends.unsettled} | ${d.sends.waiting} |`,
        ]),
    ...(s === null
      ? []
      : [
          `scheduled: ${s.notifications} notifications accepted, ${s.refused} never; received ${seconds(s.lagP50)} after their send_at at the median, ${seconds(s.lagMax)} at most`,
        ]),
    ...(d === null
      ? []
      : [
          `digests: ${d.digests} sent (${d.full} full, ${d.byWindow} at the end of their window), ${d.sentTwice} sent twice; items never accepted ${d.refused}, listed in another digest ${d.misplaced}; notifications whose data or in-app body disagree with the digest ${d.inconsistent}`,
        ]),
  ];
}
