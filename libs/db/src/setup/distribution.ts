/**
 * How each table of the schema maps onto a PostgreSQL distributed by user (Citus terms; see
 * docs/capacity.md, "Sharded by user"). Nothing runs distributed: this is the plan, kept beside
 * the schema so that it cannot drift from it. libs/db/test/setup/distribution.test.ts checks it
 * against a migrated database (every table is classified, every named column is there) and
 * against the statements of libs/db/src (a statement on a by-user table names user_id, or is in
 * UNSCOPED_STATEMENTS below with its reason).
 *
 * - `by-user`: distributed by `user_id`, all in one co-location group, so that a user's rows of
 *   every such table are on one shard and a statement naming the user runs there alone.
 * - `reference`: small, read everywhere (and joined from every shard): a copy on every node, a
 *   write goes to all of them.
 * - `by-key`: distributed by another column, not co-located with the user's rows (`why` says
 *   why); `colocateWith` names the table of its own group it goes with, if any.
 *
 * A `by-user` table with `filledFrom` is the notification log's: its `user_id` is written on every
 * row since migration 0029, and is null on the rows written before it (nothing on one node needs
 * them to carry it), until the operator's backfill fills them in by notification id
 * (docs/capacity.md, "Sharded by user"), which runs before the schema is distributed. Each such
 * table checks `user_id IS NOT NULL OR notification_id < cut` unless the id is not a UUIDv7 (NOT
 * VALID: no old row is read), so every row of a notification made after the migration carries
 * its user.
 *
 * A partitioned table counts once, by its parent's name: Citus distributes its partitions with it.
 */
export type Distribution =
  | { kind: "by-user"; column: "user_id"; filledFrom?: "0029" }
  | { kind: "reference" }
  | { kind: "by-key"; column: string; why: string; colocateWith?: string };

const BY_USER = { kind: "by-user", column: "user_id" } as const;
/** The notification log's tables that gained user_id in migration 0029 (see `filledFrom`). */
const BY_USER_SINCE_0029 = { kind: "by-user", column: "user_id", filledFrom: "0029" } as const;
const REFERENCE = { kind: "reference" } as const;

/**
 * Every table of the schema. A migration that adds one decides here where it goes (the test
 * fails until it does).
 */
export const TABLE_DISTRIBUTION: Readonly<Record<string, Distribution>> = {
  // Read on every request (authentication) and by the inbox tokens' check; one row per key.
  api_keys: REFERENCE,
  // An audience's members by user: a broadcast batch's members meet their notifications and
  // recipient rows on their own shards; an import spreads over every shard.
  audience_members: BY_USER,
  // One row per audience, with its member count.
  audiences: REFERENCE,
  // One row per broadcast, rewritten by each count (rarely: a count is kept and read again).
  broadcast_progress: REFERENCE,
  // Who a broadcast reached: written with each user's notification by the expander.
  broadcast_recipients: BY_USER,
  // One row per broadcast: read and moved on (cursor, count) by its expander, once a batch; its
  // (client, dedup key) stays unique only in a table that is not split.
  broadcasts: REFERENCE,
  // A channel's status history: each row written with the move of its channel, and its user.
  channel_status_events: BY_USER_SINCE_0029,
  // A user's address changes, listed per user.
  contact_changes: BY_USER,
  // A user's quiet-hours timers; carries the user already.
  deferred_notifications: BY_USER,
  // A channel's provider attempts, with its channel row's user.
  delivery_attempts: BY_USER_SINCE_0029,
  // The deployment's MAC secrets: a few rows, read by every process.
  deployment_secrets: REFERENCE,
  // A digest's items, written by joinDigest with the digest's user.
  digest_items: BY_USER_SINCE_0029,
  // A (client, user, template, key)'s digests: joined, sent and read per user.
  digests: BY_USER,
  idempotency_keys: {
    kind: "by-key",
    column: "key",
    why: "claimed by (client, key) before anything else is trusted: a reused key naming another user must still meet its first claim, which a table split by user would keep on another shard; its daily partitions (by slot) are distributed with it",
  },
  // The guard's records from before it was partitioned by day: read by (client, key), as the guard.
  idempotency_keys_legacy: {
    kind: "by-key",
    column: "key",
    why: "read by (client, key) as the guard is, and co-located with it; written no more, and emptied once its records are past the window",
    colocateWith: "idempotency_keys",
  },
  // A user's inbox: every read and mark names its owner.
  inbox_items: BY_USER,
  // One row per client: how many revocation rows it holds.
  inbox_token_revocation_counts: REFERENCE,
  // Read whole by every ingest instance (held in memory); a revocation is rare and capped per
  // client.
  inbox_token_revocations: REFERENCE,
  inbox_tokens: {
    kind: "by-key",
    column: "token_hash",
    why: "an opaque token is looked up by its hash before its user is known: one shard per lookup",
  },
  // A notification's channels, written by routing and the fallback chain with its user.
  notification_channels: BY_USER_SINCE_0029,
  // A notification's fallback chain, written with the notification by the accept.
  notification_fallbacks: BY_USER_SINCE_0029,
  // The log's head: one row per notification, read by the user's history and by id.
  notifications: BY_USER,
  // A user's promotional sends per day.
  promotional_daily_counts: BY_USER,
  provider_receipts: {
    kind: "by-key",
    column: "provider_id",
    why: "a provider's event names its message, not a user, and may come before the send is recorded: a message's receipts together, found by the fallback's confirmation check and the pending sweep by provider id; its key (notification_id, event_id, provider), the notification id its partition key (0031: a receipt lives and retires with its notification's day), gains provider_id, which a provider's retry of an event repeats",
  },
  publish_outbox: {
    kind: "by-key",
    column: "id",
    why: "one row per accepted batch, listing notifications of many users; a few rows in flight",
  },
  suppressions: {
    kind: "by-key",
    column: "address",
    why: "an address's entries, whoever gave it: routing and the workers ask by (channel, address), providers' events name the address",
  },
  // Where the periodic sweeps stand: a row per sweep.
  sweep_positions: REFERENCE,
  template_variants: REFERENCE,
  template_versions: REFERENCE,
  // Templates: a few per client, read by every render.
  templates: REFERENCE,
  // A (client, user, key)'s throttle slots, counted per user.
  throttle_slots: BY_USER,
  // A user's contact addresses and preferences: keyed by the user.
  user_contacts: BY_USER,
  user_preferences: BY_USER,
  webhook_attempts: {
    kind: "by-key",
    column: "endpoint_id",
    colocateWith: "webhook_deliveries",
    why: "an endpoint's posts, listed per endpoint, beside its deliveries",
  },
  // Asked on every status move by the channel trigger (is any broadcast awaiting completion?);
  // one row per broadcast whose completion an endpoint wants.
  webhook_broadcast_tallies: REFERENCE,
  // Asked for by the channel trigger, endFallback and the cancel with the notification's user;
  // the dispatcher takes the oldest of every user's (multi-shard).
  webhook_completion_checks: BY_USER_SINCE_0029,
  webhook_deliveries: {
    kind: "by-key",
    column: "endpoint_id",
    why: "an endpoint's queue: the dispatcher takes, counts and lists deliveries per endpoint, and an endpoint's in-flight limit bounds its share of a shard",
  },
  // Read by every trigger that writes events (which endpoints want them) and by the fan-out.
  webhook_endpoints: REFERENCE,
  webhook_events: {
    kind: "by-key",
    column: "client_id",
    why: "a client's feed, not a user's (broadcasts' events and pings name no user); its once-only indexes (a notification's completion, a broadcast's) gain client_id, which one notification or broadcast has one of",
  },
};

/**
 * A statement of libs/db/src that reads or writes a by-user table without naming user_id:
 * `at` is its file under libs/db/src and the top-level function (or constant) it is in.
 *
 * - `multi-shard`: reaches many users' rows by nature (a sweep, retention or a purge, a
 *   broadcast's expansion or count, a batch of many users, a lookup by an id the caller holds
 *   without its user): on Citus it runs on every shard, or takes its work one shard at a time.
 * - `unfilled`: reaches one notification's rows of a `filledFrom` table by the notification id
 *   while its caller holds the user (`why` says where from): `user_id = ` would miss the rows
 *   written before migration 0029 until the backfill has filled them in (docs/capacity.md), so it
 *   gains it then, before the schema is distributed, and leaves this list.
 * - `whole-row`: writes whole rows (user_id among their columns) without naming the column: Citus
 *   routes each row by its own user_id.
 */
export interface UnscopedStatement {
  at: string;
  table: string;
  kind: "multi-shard" | "unfilled" | "whole-row";
  why: string;
}

/** Pinned: a statement leaves it when it names user_id, and joins it only with its reason. */
export const UNSCOPED_STATEMENTS: readonly UnscopedStatement[] = [
  {
    at: "accept/outbox.ts#removeUnpublished",
    table: "notification_fallbacks",
    kind: "multi-shard",
    why: "removes the fallback chains of one accepted batch's unpublished notifications, many users' requests",
  },
  {
    at: "accept/outbox.ts#removeUnpublished",
    table: "notifications",
    kind: "multi-shard",
    why: "removes the unpublished notifications of one accepted batch, which holds many users' requests",
  },
  {
    at: "broadcasts/progress.ts#countAndKeep",
    table: "broadcast_recipients",
    kind: "multi-shard",
    why: "counts a broadcast's outcomes over all its recipients, every user of the audience",
  },
  {
    at: "broadcasts/progress.ts#countAndKeep",
    table: "notification_channels",
    kind: "multi-shard",
    why: "counts a broadcast's outcomes over its recipients' channels, every user of the audience",
  },
  {
    at: "delivery/dead-letters.ts#readChannelStates",
    table: "notification_channels",
    kind: "multi-shard",
    why: "the operator's dead-letter listing reads the channels of many letters at once, many users'",
  },
  {
    at: "delivery/dead-letters.ts#readStatusEvents",
    table: "channel_status_events",
    kind: "unfilled",
    why: "a dead letter's channel history, by its notification id; the stored letter's work item carries the user (WorkItem.user_id)",
  },
  {
    at: "delivery/history.ts#readDeliveryHistory",
    table: "delivery_attempts",
    kind: "unfilled",
    why: "the worker's dead letter reads its channel's attempts by the notification id; its work item names the user (WorkItem.user_id)",
  },
  {
    at: "digests/cancel.ts#cancelDigestItem",
    table: "digest_items",
    kind: "multi-shard",
    why: "the cancel API names a notification and its client, not its user: the item is found, and marked, by the notification id on every shard",
  },
  {
    at: "digests/join.ts#joinedDigest",
    table: "digest_items",
    kind: "unfilled",
    why: "whether the notification joined a digest, by its id; the join and the deferral release hold the user (DigestJoin.userId, the deferral row's user_id)",
  },
  {
    at: "digests/send.ts#purgeSentDigests",
    table: "digests",
    kind: "multi-shard",
    why: "retention: forgets sent digests of every user past the window",
  },
  {
    at: "digests/send.ts#sendDueDigests",
    table: "digest_items",
    kind: "multi-shard",
    why: "reads the items of every due digest taken at once, digests of many users",
  },
  {
    at: "digests/send.ts#sendDueDigests",
    table: "notifications",
    kind: "multi-shard",
    why: "reads the items of every due digest taken at once, digests of many users",
  },
  {
    at: "inbox/items.ts#inboxItemsSince",
    table: "inbox_items",
    kind: "multi-shard",
    why: "the streams' poller starts at the newest item id of all users (one poll serves every stream of a process)",
  },
  {
    at: "lock-order.ts#lockChannelKeys",
    table: "notification_channels",
    kind: "multi-shard",
    why: "locks the channel rows of a batch of moves in key order, channels of many users (a fragment of the workers' and receipts' batched statements)",
  },
  {
    at: "lookup/records.ts#fallbackPending",
    table: "notification_channels",
    kind: "unfilled",
    why: "a fragment of the notification reads: the chain of the notification row it is read with, by its id; that row carries the user",
  },
  {
    at: "lookup/records.ts#fallbackPending",
    table: "notification_fallbacks",
    kind: "unfilled",
    why: "a fragment of the notification reads: the chain of the notification row it is read with, by its id; that row carries the user",
  },
  {
    at: "lookup/records.ts#withChannels",
    table: "notification_channels",
    kind: "unfilled",
    why: "the channels of a page of notification rows just read, by their ids; those rows carry their users",
  },
  {
    at: "lookup/timeline.ts#readNotificationTimeline",
    table: "channel_status_events",
    kind: "multi-shard",
    why: "the timeline API names a notification and its client, not its user: its history is read by the notification id",
  },
  {
    at: "lookup/timeline.ts#readNotificationTimeline",
    table: "delivery_attempts",
    kind: "multi-shard",
    why: "the timeline API names a notification and its client, not its user: its attempts are read by the notification id",
  },
  {
    at: "lookup/timeline.ts#readNotificationTimeline",
    table: "notification_channels",
    kind: "multi-shard",
    why: "the timeline API names a notification and its client, not its user: its channels are read by the notification id",
  },
  {
    at: "lookup/timeline.ts#readNotificationTimeline",
    table: "notification_fallbacks",
    kind: "multi-shard",
    why: "the timeline API names a notification and its client, not its user: its chain is read by the notification id",
  },
  {
    at: "receipts/record.ts#applyPendingReceipts",
    table: "notification_channels",
    kind: "multi-shard",
    why: "the pending sweep: every user's receipts waiting for their send",
  },
  {
    at: "receipts/record.ts#bindAndApply",
    table: "notification_channels",
    kind: "multi-shard",
    why: "binds a receipt batch's provider ids to the channels its payloads name, channels of many users",
  },
  {
    at: "receipts/record.ts#channelOf",
    table: "notification_channels",
    kind: "multi-shard",
    why: "a receipt's channel, found by provider id or the payload's notification id, not by a user",
  },
  {
    at: "receipts/record.ts#sendLookup",
    table: "notification_channels",
    kind: "multi-shard",
    why: "a provider's event names its message (provider id) or a notification id from its payload, not a user: the send is looked up on every shard",
  },
  {
    at: "receipts/record.ts#sendOf",
    table: "notification_channels",
    kind: "multi-shard",
    why: "a provider's event names its message (provider id) or a notification id from its payload, not a user: the send is looked up on every shard",
  },
  {
    at: "reconciler/stalled.ts#findUnroutedNotifications",
    table: "notifications",
    kind: "multi-shard",
    why: "the reconciler's sweep of the log by id range, every user's notifications",
  },
  {
    at: "reconciler/stalled.ts#touchWaitingChannel",
    table: "notification_channels",
    kind: "unfilled",
    why: "a stalled channel the reconciler found, by its key; the lane message it republishes names the user",
  },
  {
    at: "retention/archive.ts#restoreArchived",
    table: "channel_status_events",
    kind: "whole-row",
    why: "puts archived rows back whole (jsonb_populate_recordset), each with its user_id (the notification's when archived without one)",
  },
  {
    at: "retention/archive.ts#restoreArchived",
    table: "delivery_attempts",
    kind: "whole-row",
    why: "puts archived rows back whole (jsonb_populate_recordset), each with its user_id (the notification's when archived without one)",
  },
  {
    at: "retention/archive.ts#restoreArchived",
    table: "notification_channels",
    kind: "whole-row",
    why: "puts archived rows back whole (jsonb_populate_recordset), each with its user_id (the notification's when archived without one)",
  },
  {
    at: "retention/archive.ts#restoreArchived",
    table: "notification_fallbacks",
    kind: "whole-row",
    why: "puts archived rows back whole (jsonb_populate_recordset), each with its user_id (the notification's when archived without one)",
  },
  {
    at: "retention/archive.ts#takeArchiveBatch",
    table: "inbox_items",
    kind: "multi-shard",
    why: "retention: archives and deletes the inbox items of the notifications it takes (the default and first partitions), every user's",
  },
  {
    at: "retention/archive.ts#takeArchiveBatch",
    table: "broadcast_recipients",
    kind: "multi-shard",
    why: "retention: deletes the broadcast recipients of the notifications it takes (the default and first partitions), every user's",
  },
  {
    at: "retention/archive.ts#restoreArchived",
    table: "inbox_items",
    kind: "whole-row",
    why: "puts an archived inbox item back whole (jsonb_populate_record), its user_id among its columns",
  },
  {
    at: "retention/archive.ts#restoreArchived",
    table: "notifications",
    kind: "whole-row",
    why: "puts an archived row back whole (jsonb_populate_record), its user_id among its columns",
  },
  {
    at: "retention/archive.ts#takeArchiveBatch",
    table: "channel_status_events",
    kind: "multi-shard",
    why: "retention: archives and deletes the oldest notifications' history, every user's",
  },
  {
    at: "retention/archive.ts#takeArchiveBatch",
    table: "deferred_notifications",
    kind: "multi-shard",
    why: "retention: the archive batch's check that no timer waits for a notification it takes, over every user's rows",
  },
  {
    at: "retention/archive.ts#takeArchiveBatch",
    table: "delivery_attempts",
    kind: "multi-shard",
    why: "retention: archives and deletes the oldest notifications' attempts, every user's",
  },
  {
    at: "retention/archive.ts#takeArchiveBatch",
    table: "digest_items",
    kind: "multi-shard",
    why: "retention: checks and deletes the oldest notifications' digest items, every user's",
  },
  {
    at: "retention/archive.ts#takeArchiveBatch",
    table: "digests",
    kind: "multi-shard",
    why: "retention: the archive batch's check that no open digest waits for an item it takes",
  },
  {
    at: "retention/archive.ts#takeArchiveBatch",
    table: "notification_channels",
    kind: "multi-shard",
    why: "retention: archives and deletes the oldest notifications' channels, every user's",
  },
  {
    at: "retention/archive.ts#takeArchiveBatch",
    table: "notification_fallbacks",
    kind: "multi-shard",
    why: "retention: archives and deletes the oldest notifications' fallback chains, every user's",
  },
  {
    at: "retention/archive.ts#takeArchiveBatch",
    table: "notifications",
    kind: "multi-shard",
    why: "retention: takes the oldest notifications of the default and first partitions, every user's, and deletes them",
  },
  {
    at: "routing/cancel.ts#cancelNotification",
    table: "notification_channels",
    kind: "unfilled",
    why: "locks and moves the canceled notification's channels by its id; the cancel's first read returns the notification's user_id",
  },
  {
    at: "routing/channels.ts#listPendingChannels",
    table: "notification_channels",
    kind: "unfilled",
    why: "a redelivered routing's pending channels, by the notification id; its lane message names the user",
  },
  {
    at: "routing/channels.ts#recordRoutedChannels",
    table: "notification_channels",
    kind: "unfilled",
    why: "whether the notification was routed before (and throttled), and its suppression over a cap, by its id; routing has the user (Routing.userId)",
  },
  {
    at: "routing/channels.ts#settlePendingChannel",
    table: "notification_channels",
    kind: "unfilled",
    why: "settles a redelivered routing's pending channel by its key; its lane message names the user",
  },
  {
    at: "routing/daily-cap.ts#purgeCapCounts",
    table: "promotional_daily_counts",
    kind: "multi-shard",
    why: "retention: drops every user's counters of past days",
  },
  {
    at: "routing/deferrals.ts#releaseDeferrals",
    table: "deferred_notifications",
    kind: "multi-shard",
    why: "a release takes the due timers of many users at once (FOR UPDATE SKIP LOCKED), moves or drops them",
  },
  {
    at: "routing/deferrals.ts#releaseDeferrals",
    table: "notification_channels",
    kind: "multi-shard",
    why: "a release locks the deferred channels of many users' due timers at once",
  },
  {
    at: "routing/fallbacks.ts#startFallbackWait",
    table: "notification_fallbacks",
    kind: "unfilled",
    why: "starts a chain's wait by the notification id; the job's open chain carries the user (OpenFallback.user_id)",
  },
  {
    at: "routing/fallbacks.ts#takeFallbackStep",
    table: "notification_fallbacks",
    kind: "unfilled",
    why: "moves a chain on by compare-and-set on the notification id; the step carries the user (its userId)",
  },
  {
    at: "routing/throttle.ts#purgeThrottleSlots",
    table: "throttle_slots",
    kind: "multi-shard",
    why: "retention: drops every user's slots past the longest period",
  },
  {
    at: "webhooks/dispatch.ts#checkCompletions",
    table: "broadcast_recipients",
    kind: "multi-shard",
    why: "the dispatcher's round: the broadcasts of many completed notifications, counted at once",
  },
  {
    at: "webhooks/dispatch.ts#checkCompletions",
    table: "webhook_completion_checks",
    kind: "multi-shard",
    why: "the dispatcher's round takes the oldest checks of every user",
  },
];
