import type { Bus, Disposition, KV } from "@notify/bus";
import type { ChannelStatus, WorkItem } from "@notify/core";
import type { DeliveryChannelRow, Sql } from "@notify/db";
import { type Logger, leanLogger } from "@notify/log";
import type { DeliveryMetrics } from "../metrics.js";
import type { ProviderGate } from "../providers/gate.js";
import type { UnsubscribeHeaders } from "./unsubscribe.js";
import type { UnusedClaims } from "./unused-claims.js";

export interface DeliverDeps {
  /** Postgres of this item's lane: transactional has a pool of its own (invariant 4). */
  sql: Sql;
  bus: Bus;
  guard: KV;
  /** The provider of the pool's channel, behind its breaker and token buckets. */
  gate: ProviderGate;
  /**
   * The providers the channel fails over to, in order (email: SMTP after SendGrid), each
   * behind its own breaker and buckets; none by default.
   */
  failover?: readonly ProviderGate[];
  /** Attempts of one notification a provider gets before the next ones go to the next provider. */
  failoverAfterAttempts?: number;
  log: Logger;
  metrics: DeliveryMetrics;
  maxAttempts: number;
  retryBaseMs: number;
  retryMaxMs: number;
  /**
   * A claim still `sending` after this long belongs to a worker that died mid-send: longer
   * than any provider call may take, plus the writes that follow it.
   */
  claimTtlMs: number;
  /** host:pid, written into claims for operators. */
  worker: string;
  /** This process's claims whose write may have landed though its answer was lost. */
  unusedClaims: UnusedClaims;
  /** Every random draw of a delivery, in [0, 1): the policy's jitter and the look-again delays. */
  random: () => number;
  /** An email's List-Unsubscribe headers (UNSUBSCRIBE_*); absent: email goes without them. */
  unsubscribe?: UnsubscribeHeaders;
}

/** One work item in hand: what each step of its delivery (send, park, resume, settle) reads. */
export interface Context {
  deps: DeliverDeps;
  item: WorkItem;
  row: DeliveryChannelRow;
  /** The provider this attempt goes to: the channel's own, or one it failed over to. */
  gate: ProviderGate;
  key: string;
  /** The item's logger, made on first use (a getter: never assigned). */
  readonly log: Logger;
  started: number;
  waitedMs: number;
}

/** A draw below `ms`, which spreads the look-again of items that met the same obstacle. */
export const jitter = (deps: Pick<DeliverDeps, "random">, ms: number) => Math.floor(deps.random() * ms);

/** The one log line and outcome count of a handled item (a wide event). */
export function done(
  ctx: Context,
  status: ChannelStatus | "skipped",
  fields: Record<string, unknown>,
  disposition: Disposition,
): Disposition {
  const { deps, item } = ctx;
  deps.metrics.outcomes.inc({ channel: item.channel, lane: item.priority, status });
  // A parked item is looked at again every few seconds while the breaker stays open.
  const [level, message] =
    status === "delivered"
      ? (["info", "delivered"] as const)
      : status === "skipped"
        ? (["debug", "claim held by another worker; looking again later"] as const)
        : status === "canceled"
          ? (["info", "canceled by its client; not sent"] as const)
          : status === "parked" && ctx.row.status === "parked"
            ? (["debug", "still parked"] as const)
            : (["warn", status === "parked" ? "provider breaker open; parked" : `not delivered: ${status}`] as const);
  // Nothing is built for a line the level leaves out (the item's logger included).
  if (!deps.log.isLevelEnabled(level)) return disposition;
  const line = {
    ...fields,
    status,
    provider: ctx.gate.provider.name,
    waited_ms: Math.round(ctx.waitedMs),
    ms: Math.round(performance.now() - ctx.started),
  };
  // A delivery's own line (the hot one) holds only fields set here and by the steps: written lean,
  // with the item's ids as fields rather than through a child logger per item.
  if (level === "info") {
    leanLogger(deps.log).info(
      { notification_id: item.notification_id, channel: item.channel, lane: item.priority, ...line },
      message,
    );
  } else ctx.log[level](line, message);
  return disposition;
}
