import type { Bus } from "@notify/bus";
import {
  type Channel,
  type ChannelStatus,
  type DigestSpec,
  type LaneMessage,
  newId,
  type Priority,
  partitionOf,
  type ThrottleSpec,
  type WorkItem,
} from "@notify/core";
import { createDb, type Database, seedTemplate } from "@notify/db";
import { captureLogger, freshBus, freshDatabase } from "@notify/testing";
import type { ProcessorDeps } from "../src/consumers.js";

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** A fresh database and namespace, and processor dependencies with a clock the test moves. */
export async function processorFixture(
  t: Teardown,
  options: { partitions?: number; poolSize?: number; ttlMs?: number } = {},
) {
  const { url, database: small } = await freshDatabase(t);
  // The fixture's own pool is tiny; routing at volume wants the processor's default size.
  const database = options.poolSize ? createDb({ url, max: options.poolSize }) : small;
  if (options.poolSize) t.teardown(() => database.close());
  const bus = await freshBus(t, options.partitions ?? 2);
  const { log, lines } = captureLogger("processor");
  const clock = { now: new Date("2026-06-01T12:00:00Z") };
  const deps: ProcessorDeps = {
    databases: { transactional: database, promotional: database },
    bus,
    log,
    policy: { criticalCategories: ["security", "otp"], quietHoursDropCategories: ["flash_sale"] },
    partitionConcurrency: 16,
    preferenceTtlMs: options.ttlMs ?? 0,
    now: () => clock.now,
  };
  await seedTemplate(database, {
    id: "promo",
    params: ["name"],
    variants: [
      { channel: "email", locale: "en", subject: "Hi <%= it.name %>", body: "<p>Deal for <%= it.name %></p>" },
      { channel: "sms", locale: "en", subject: null, body: "Deal for <%= it.name %>" },
      { channel: "push", locale: "en", subject: "Deal", body: "For <%= it.name %>" },
      { channel: "in_app", locale: "en", subject: "Deal", body: "For <%= it.name %>" },
    ],
  });
  return { url, database, bus, log, lines, clock, deps };
}

/** A user with an email address, a phone number and a push subscription. */
export async function seedUser(
  database: Database,
  userId: string,
  preferences: {
    channel_optout?: Channel[];
    category_optout?: string[];
    quiet_hours?: { start: string; end: string; tz: string } | null;
    rate_cap_per_day?: number | null;
    locale?: string | null;
    time_zone?: string | null;
    push?: boolean;
  } = {},
): Promise<void> {
  const { sql } = database;
  await sql`insert into user_contacts (user_id, email, phone) values (${userId}, ${`${userId}@example.com`}, '+15550001111')
    on conflict (user_id) do update set email = excluded.email, phone = excluded.phone`;
  const tokens =
    preferences.push === false ? [] : [{ endpoint: "https://push.example.com/s/1", keys: { p256dh: "p", auth: "a" } }];
  await sql`insert into user_preferences (user_id, channel_optout, category_optout, quiet_hours, rate_cap_per_day, device_tokens, locale, time_zone)
    values (${userId}, ${preferences.channel_optout ?? []}, ${preferences.category_optout ?? []},
            ${preferences.quiet_hours ? sql.json(preferences.quiet_hours) : null}, ${preferences.rate_cap_per_day ?? null},
            ${sql.json(tokens)}, ${preferences.locale ?? null}, ${preferences.time_zone ?? null})
    on conflict (user_id) do update set channel_optout = excluded.channel_optout, category_optout = excluded.category_optout,
      quiet_hours = excluded.quiet_hours, rate_cap_per_day = excluded.rate_cap_per_day,
      device_tokens = excluded.device_tokens, locale = excluded.locale, time_zone = excluded.time_zone, updated_at = now()`;
}

export interface NewNotification {
  user_id: string;
  category?: string;
  priority?: Priority;
  template_id?: string;
  template_version?: number;
  channels?: Channel[] | null;
  data?: Record<string, unknown>;
  deliver_by?: string;
  send_at?: string;
  digest?: DigestSpec;
  throttle?: ThrottleSpec;
}

/** Stores notification rows as ingest would (one multi-row insert) and returns their lane messages. */
export async function storeNotifications(
  database: Database,
  bus: Bus,
  notifications: readonly NewNotification[],
): Promise<LaneMessage[]> {
  const messages: LaneMessage[] = notifications.map((n) => ({
    notification_id: newId(),
    client_id: "shop",
    user_id: n.user_id,
    category: n.category ?? "news",
    template_id: n.template_id ?? "promo",
    ...(n.template_version === undefined ? {} : { template_version: n.template_version }),
    priority: n.priority ?? "promotional",
    channels: n.channels === undefined ? ["email"] : n.channels,
    data: n.data ?? { name: "Ada" },
    created_at: new Date().toISOString(),
    ...(n.deliver_by === undefined ? {} : { deliver_by: n.deliver_by }),
    ...(n.send_at === undefined ? {} : { send_at: n.send_at }),
    ...(n.digest === undefined ? {} : { digest: n.digest }),
    ...(n.throttle === undefined ? {} : { throttle: n.throttle }),
  }));
  const { sql } = database;
  for (let i = 0; i < messages.length; i += 5000) {
    const chunk = messages.slice(i, i + 5000);
    await sql`
      insert into notifications (id, client_id, user_id, category, template_id, template_version, priority,
                                 requested_channels, data, dedup_key, request_hash, partition, deliver_by, send_at, digest, throttle)
      select id, 'shop', user_id, category, template_id, template_version, priority,
             case when channels = '' then null else string_to_array(channels, ',') end, data::jsonb, id, 'h', part,
             deliver_by::timestamptz, send_at::timestamptz, digest::jsonb, throttle::jsonb
      from unnest(${chunk.map((m) => m.notification_id)}::text[], ${chunk.map((m) => m.user_id)}::text[],
                  ${chunk.map((m) => m.category)}::text[], ${chunk.map((m) => m.template_id)}::text[],
                  ${chunk.map((m) => m.template_version ?? null) as number[]}::int[], ${chunk.map((m) => m.priority)}::text[],
                  ${chunk.map((m) => (m.channels ?? []).join(","))}::text[], ${chunk.map((m) => JSON.stringify(m.data))}::text[],
                  ${chunk.map((m) => partitionOf(m.user_id, bus.naming.partitions))}::int[],
                  ${chunk.map((m) => m.deliver_by ?? null) as string[]}::text[],
                  ${chunk.map((m) => m.send_at ?? null) as string[]}::text[],
                  ${chunk.map((m) => (m.digest ? JSON.stringify(m.digest) : null)) as string[]}::text[],
                  ${chunk.map((m) => (m.throttle ? JSON.stringify(m.throttle) : null)) as string[]}::text[])
           as x(id, user_id, category, template_id, template_version, priority, channels, data, part, deliver_by, send_at, digest, throttle)`;
  }
  return messages;
}

/** Publishes lane messages with up to `window` publishes in flight, in order per subject. */
export async function publishLane(bus: Bus, messages: readonly LaneMessage[], window = 256): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < messages.length) {
      const m = messages[next++] as LaneMessage;
      await bus.publish(
        bus.subjects.lane(m.priority, partitionOf(m.user_id, bus.naming.partitions)),
        m,
        m.notification_id,
      );
    }
  };
  await Promise.all(Array.from({ length: Math.min(window, messages.length) }, worker));
}

export async function channelRows(database: Database, notificationId: string) {
  const rows = await database.sql<
    { channel: Channel; status: ChannelStatus; reason: string | null; next_attempt_at: Date | null }[]
  >`select channel, status, reason, next_attempt_at from notification_channels where notification_id = ${notificationId} order by channel`;
  return Object.fromEntries(
    rows.map((r) => [r.channel, { status: r.status, reason: r.reason, at: r.next_attempt_at }]),
  );
}

/** Every work item stored in NOTIFY_WORK, in stream order (no worker runs in these tests). */
export async function workItems(bus: Bus): Promise<Array<{ subject: string; item: WorkItem }>> {
  const info = await bus.jsm.streams.info(bus.streams.work);
  const items: Array<{ subject: string; item: WorkItem }> = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
    const msg = await bus.jsm.streams.getMessage(bus.streams.work, { seq }).catch(() => null);
    if (msg) items.push({ subject: msg.subject, item: msg.json<WorkItem>() });
  }
  return items;
}
