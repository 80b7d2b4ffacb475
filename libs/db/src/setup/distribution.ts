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
 * - `by-user-missing`: one user's rows that do not carry the user id yet: each is reached by
 *   `key` (a notification id), and gains `user_id` before the schema can be distributed.
 *
 * A partitioned table counts once, by its parent's name: Citus distributes its partitions with it.
 */
export type Distribution =
  | { kind: "by-user"; column: "user_id" }
  | { kind: "reference" }
  | { kind: "by-key"; column: string; why: string; colocateWith?: string }
  | { kind: "by-user-missing"; key: string; why: string };

const BY_USER = { kind: "by-user", column: "user_id" } as const;
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
  channel_status_events: {
    kind: "by-user-missing",
    key: "notification_id",
    why: "each row is written in the statement that moves its channel, whose writer has the notification's message (its user), or finds the channel first (receipts)",
  },
  // A user's address changes, listed per user.
  contact_changes: BY_USER,
  // A user's quiet-hours timers; carries the user already.
  deferred_notifications: BY_USER,
  delivery_attempts: {
    kind: "by-user-missing",
    key: "notification_id",
    why: "written by the worker for its work item, whose lane message names the user",
  },
  // The deployment's MAC secrets: a few rows, read by every process.
  deployment_secrets: REFERENCE,
  digest_items: {
    kind: "by-user-missing",
    key: "notification_id",
    why: "written by joinDigest, which has the user (its digest's key names it); read with the digest's notifications",
  },
  // A (client, user, template, key)'s digests: joined, sent and read per user.
  digests: BY_USER,
  idempotency_keys: {
    kind: "by-key",
    column: "key",
    why: "claimed by (client, key) before anything else is trusted: a reused key naming another user must still meet its first claim, which a table split by user would keep on another shard",
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
  notification_channels: {
    kind: "by-user-missing",
    key: "notification_id",
    why: "written by routing, the workers and the receipts, which have the notification's message (its user), except a receipt that names only the provider's message id",
  },
  notification_fallbacks: {
    kind: "by-user-missing",
    key: "notification_id",
    why: "written by the accept in the statement that inserts the notification, which has the user",
  },
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
  webhook_completion_checks: {
    kind: "by-user-missing",
    key: "notification_id",
    why: "asked for by the channel trigger, endFallback and the cancel, which have the notification's channels (their user, once they carry it); the dispatcher then reads those channels",
  },
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
 * - `by-id`: reaches one user's rows by another key (a notification's, a digest's id) while its
 *   caller holds the user id (`why` says where from): it gains `user_id = ` before it runs on
 *   Citus, and leaves this list.
 * - `whole-row`: writes whole rows (user_id among their columns) without naming the column: Citus
 *   routes each row by its own user_id.
 */
export interface UnscopedStatement {
  at: string;
  table: string;
  kind: "multi-shard" | "by-id" | "whole-row";
  why: string;
}

/** Pinned: a statement leaves it when it names user_id, and joins it only with its reason. */
export const UNSCOPED_STATEMENTS: readonly UnscopedStatement[] = [
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
    at: "delivery/channel.ts#loadChannel",
    table: "notifications",
    kind: "by-id",
    why: "the worker's read of its channel looks the notification's client up by id; its work item names the user (WorkItem.user_id)",
  },
  {
    at: "digests/cancel.ts#cancelDigestItem",
    table: "digests",
    kind: "by-id",
    why: "a cancel's digest, found from the item and moved by its id; the cancel's first statement (cancelNotification) reads the notification, whose user_id it can return",
  },
  {
    at: "digests/join.ts#joinDigest",
    table: "digests",
    kind: "by-id",
    why: "counts the item into the digest it locked, by id; the join has the user (DigestJoin.userId)",
  },
  {
    at: "digests/send.ts#sendDueDigests",
    table: "digests",
    kind: "by-id",
    why: "marks each due digest sent by its id; the due rows it took carry their user_id",
  },
  {
    at: "digests/send.ts#sendDueDigests",
    table: "notifications",
    kind: "multi-shard",
    why: "reads the items of every due digest taken at once, digests of many users",
  },
  {
    at: "digests/send.ts#purgeSentDigests",
    table: "digests",
    kind: "multi-shard",
    why: "retention: forgets sent digests of every user past the window",
  },
  {
    at: "inbox/items.ts#inboxItemsSince",
    table: "inbox_items",
    kind: "multi-shard",
    why: "the streams' poller starts at the newest item id of all users (one poll serves every stream of a process)",
  },
  {
    at: "lookup/records.ts#digestOf",
    table: "digests",
    kind: "by-id",
    why: "a fragment of the notification reads: the digest of the notification row it is read with, whose user_id is that digest's",
  },
  {
    at: "receipts/record.ts#appliedWithTraces",
    table: "notifications",
    kind: "by-id",
    why: "a receipt's notification, joined from its channel row for the traceparent; the channel row carries its user once notification_channels does (by-user-missing)",
  },
  {
    at: "reconciler/stalled.ts#findUnroutedNotifications",
    table: "notifications",
    kind: "multi-shard",
    why: "the reconciler's sweep of the log by id range, every user's notifications",
  },
  {
    at: "reconciler/stalled.ts#settleInAppFromInbox",
    table: "inbox_items",
    kind: "multi-shard",
    why: "the reconciler's sweep of unsettled in-app channels, every user's",
  },
  {
    at: "retention/archive.ts#takeArchiveBatch",
    table: "deferred_notifications",
    kind: "multi-shard",
    why: "retention: the archive batch's check that no timer waits for a notification it takes, over every user's rows",
  },
  {
    at: "retention/archive.ts#takeArchiveBatch",
    table: "digests",
    kind: "multi-shard",
    why: "retention: the archive batch's check that no open digest waits for an item it takes",
  },
  {
    at: "retention/archive.ts#takeArchiveBatch",
    table: "notifications",
    kind: "multi-shard",
    why: "retention: takes the oldest notifications of the default and first partitions, every user's, and deletes them",
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
    at: "routing/cancel.ts#cancelNotification",
    table: "notifications",
    kind: "multi-shard",
    why: "the cancel API names a notification and its client, not its user: the first read probes every shard's index once; the chain's end looks its client up by id again",
  },
  {
    at: "routing/cancel.ts#cancelNotification",
    table: "broadcast_recipients",
    kind: "by-id",
    why: "whether a broadcast's tally counts the canceled notification, by its id; the cancel's first read can return the notification's user_id",
  },
  {
    at: "routing/cancel.ts#cancelNotification",
    table: "deferred_notifications",
    kind: "by-id",
    why: "locks and drops the canceled notification's timer by its id; the cancel's first read can return the notification's user_id",
  },
  {
    at: "routing/channels.ts#recordRoutedChannels",
    table: "notifications",
    kind: "by-id",
    why: "checks that the notification being routed is still there, by id; routing has the user (Routing.userId)",
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
    at: "routing/fallbacks.ts#endFallback",
    table: "broadcast_recipients",
    kind: "by-id",
    why: "whether a broadcast's tally counts the notification whose chain ends, by its id; the job's open chain carries the user (OpenFallback.user_id)",
  },
  {
    at: "routing/fallbacks.ts#endFallback",
    table: "notifications",
    kind: "by-id",
    why: "the ended chain's notification, for its client, by id; the job's open chain carries the user (OpenFallback.user_id)",
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
];
