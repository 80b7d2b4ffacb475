import type { Bus } from "@notify/bus";
import { type Channel, decideChannels, type LaneMessage, type WorkItem } from "@notify/core";
import type { Database, DeviceToken } from "@notify/db";
import type { Logger } from "@notify/log";
import type { Renderer } from "./render.js";

export interface RouteDeps {
  database: Database;
  bus: Bus;
  render: Renderer;
  log: Logger;
  criticalCategories: readonly string[];
}

interface UserRow {
  email: string | null;
  phone: string | null;
  channel_optout: string[] | null;
  category_optout: string[] | null;
  device_tokens: DeviceToken[] | null;
  locale: string | null;
}

type Planned = {
  channel: Channel;
  status: "pending" | "suppressed" | "failed";
  reason: string | null;
  item?: WorkItem;
};

/**
 * The processing stage for one lane message (spec rule 7): preferences, rendering, routing.
 * Safe to run twice for one notification: channel rows are inserted once (ON CONFLICT DO
 * NOTHING) and a work item is published for every channel still pending, with the msg id
 * `<notification>:<channel>` that JetStream deduplicates; the worker's send guard covers the rest.
 */
export async function routeNotification(deps: RouteDeps, message: LaneMessage): Promise<"routed" | "gone"> {
  const { sql } = deps.database;
  const [user] = await sql<UserRow[]>`
    select c.email, c.phone, p.channel_optout, p.category_optout, p.device_tokens, p.locale
    from (select ${message.user_id}::text as user_id) u
    left join user_contacts c on c.user_id = u.user_id
    left join user_preferences p on p.user_id = u.user_id`;
  const deviceTokens = user?.device_tokens ?? [];
  const decisions = decideChannels({
    requested: message.channels,
    category: message.category,
    critical: deps.criticalCategories.includes(message.category),
    preferences: { channelOptout: user?.channel_optout ?? [], categoryOptout: user?.category_optout ?? [] },
    reach: { email: user?.email ?? null, phone: user?.phone ?? null, pushSubscriptions: deviceTokens.length },
  });

  const planned: Planned[] = [];
  for (const decision of decisions) {
    if (!decision.route) {
      planned.push({ channel: decision.channel, status: "suppressed", reason: decision.reason });
      continue;
    }
    const rendered = await deps.render(message.template_id, decision.channel, user?.locale ?? null, message.data);
    if (!rendered) {
      planned.push({ channel: decision.channel, status: "failed", reason: "no_template_variant" });
      continue;
    }
    const to =
      decision.channel === "email"
        ? (user?.email as string)
        : decision.channel === "sms"
          ? (user?.phone as string)
          : decision.channel === "push"
            ? JSON.stringify(deviceTokens)
            : message.user_id;
    planned.push({
      channel: decision.channel,
      status: "pending",
      reason: null,
      item: {
        notification_id: message.notification_id,
        channel: decision.channel,
        priority: message.priority,
        user_id: message.user_id,
        category: message.category,
        to,
        subject: rendered.subject,
        body: rendered.body,
        attempt: 0,
      },
    });
  }
  if (planned.length === 0) return "routed";

  try {
    await sql`
      insert into notification_channels (notification_id, channel, status, reason)
      select ${message.notification_id}, * from unnest(${planned.map((p) => p.channel)}::text[], ${planned.map((p) => p.status)}::text[], ${planned.map((p) => p.reason) as string[]}::text[])
      on conflict (notification_id, channel) do nothing`;
  } catch (error) {
    // The row was removed by ingest's compensation (its publish failed): nothing to route.
    if ((error as { code?: string }).code === "23503") return "gone";
    throw error;
  }
  const pending = await sql<{ channel: Channel }[]>`
    select channel from notification_channels where notification_id = ${message.notification_id} and status = 'pending'`;
  const stillPending = new Set(pending.map((r) => r.channel));
  await Promise.all(
    planned
      .filter((p) => p.item && stillPending.has(p.channel))
      .map((p) =>
        deps.bus.publish(
          deps.bus.subjects.work(p.channel, message.priority),
          p.item,
          `${message.notification_id}:${p.channel}`,
        ),
      ),
  );
  deps.log.debug(
    { notification_id: message.notification_id, planned: planned.map(({ item: _, ...rest }) => rest) },
    "routed",
  );
  return "routed";
}
