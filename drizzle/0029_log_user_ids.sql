-- The notification log's per-user tables carry the notification's user (`user_id`), as the
-- notifications table does, so that a PostgreSQL distributed by user keeps a user's channels,
-- status history, attempts, fallback chain, digest items and completion checks on the user's
-- shard (docs/capacity.md, "Sharded by user"). Every writer sets it on every row it inserts.
--
-- A nullable column without a default is added to the catalog alone: no row is rewritten or
-- scanned, on the partitioned tables and on each of their partitions. The six tables' locks are
-- taken all at once or none, as 0028 takes them (a running worker holds a channel row and then
-- writes its history row: one ALTER after the other within this transaction could deadlock with
-- it), and held for the catalog changes only.
--
-- Rows written before this migration keep a null user_id. They are in the partitions that exist
-- when it runs (`_p0`, `_default` and the days 0028 and the processor's job made ahead, today's
-- among them) and in digest_items and webhook_completion_checks, and they retire with retention
-- like any other row; nothing on one node needs their user. Before the schema is distributed, an
-- operator fills them in batches by notification id (docs/capacity.md gives the statements).
--
-- A row whose notification id is a UUIDv7 (as every id the service makes is) at or past the cut
-- (the end of the log's partitions made so far, at least a day ahead: a week ahead once the
-- processor's job has run) must carry its user: each table gets CHECK (user_id IS NOT NULL OR
-- notification_id < cut OR the id is not a UUIDv7), NOT VALID so that no existing row is scanned.
-- PostgreSQL enforces a NOT VALID check on every row inserted or updated from then on, and a
-- partition made later inherits it. Rows of earlier ids (written before, or by an old version
-- still running while the new one rolls out) pass as before, so an upgrade with the service
-- running fails no statement; every id made after the cut is the new version's. An id of
-- another shape (the 13th hex digit, the UUID version, is not 7) is no id the service makes.
DO $$
DECLARE
	"tables" text[] := ARRAY['notification_channels', 'channel_status_events', 'delivery_attempts',
		'notification_fallbacks', 'digest_items', 'webhook_completion_checks'];
	"saved" text := current_setting('lock_timeout');
	"deadline" timestamptz := clock_timestamp() + interval '5 minutes';
	"t" text;
BEGIN
	LOOP
		PERFORM set_config('lock_timeout', '50ms', true);
		BEGIN
			LOCK TABLE "notification_channels", "channel_status_events", "delivery_attempts", "notification_fallbacks",
				"digest_items", "webhook_completion_checks" IN ACCESS EXCLUSIVE MODE;
			EXIT;
		EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
			NULL;
		END;
		IF clock_timestamp() > "deadline" THEN
			RAISE EXCEPTION 'the notification log''s tables stayed busy for 5 minutes; nothing was changed: run the migration again';
		END IF;
		PERFORM set_config('lock_timeout', "saved", true);
		FOREACH "t" IN ARRAY "tables" LOOP
			BEGIN
				EXECUTE format('LOCK TABLE %I IN ACCESS EXCLUSIVE MODE', "t");
				RAISE SQLSTATE 'NL029';
			EXCEPTION WHEN SQLSTATE 'NL029' THEN
				NULL;
			END;
		END LOOP;
	END LOOP;
	PERFORM set_config('lock_timeout', "saved", true);
END $$;--> statement-breakpoint
ALTER TABLE "notification_channels" ADD COLUMN "user_id" text;--> statement-breakpoint
ALTER TABLE "channel_status_events" ADD COLUMN "user_id" text;--> statement-breakpoint
ALTER TABLE "delivery_attempts" ADD COLUMN "user_id" text;--> statement-breakpoint
ALTER TABLE "notification_fallbacks" ADD COLUMN "user_id" text;--> statement-breakpoint
ALTER TABLE "digest_items" ADD COLUMN "user_id" text;--> statement-breakpoint
ALTER TABLE "webhook_completion_checks" ADD COLUMN "user_id" text;--> statement-breakpoint
DO $$
DECLARE
	"cut" text := "notify_log_bound"(greatest(
		(SELECT max("to_at") FROM "notify_log_partitions"), now() + interval '1 day'));
	"t" text;
BEGIN
	FOREACH "t" IN ARRAY ARRAY['notification_channels', 'channel_status_events', 'delivery_attempts',
		'notification_fallbacks', 'digest_items', 'webhook_completion_checks'] LOOP
		EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK ("user_id" IS NOT NULL OR "notification_id" < %L OR substr("notification_id", 15, 1) <> ''7'') NOT VALID',
			"t", "t" || '_user_id_check', "cut");
	END LOOP;
END $$;--> statement-breakpoint
-- 0028's function, with each completion check carrying the notification's user (read with its
-- client by the same lookup).
CREATE OR REPLACE FUNCTION "webhook_channel_events"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	"changes" jsonb;
	-- A broadcast's completion is awaited: its recipients' outcomes are counted even while no
	-- endpoint is enabled, so the count is whole when one is enabled again.
	"tallied" boolean := EXISTS (SELECT 1 FROM "webhook_broadcast_tallies" WHERE "completed_at" IS NULL);
BEGIN
	IF NOT ("tallied" OR "webhook_any_enabled"()) THEN RETURN NULL; END IF;
	-- Each branch reads only its own trigger's transition tables.
	IF TG_OP = 'INSERT' THEN
		SELECT jsonb_agg(to_jsonb(c)) INTO "changes" FROM "inserted_channels" c;
	ELSE
		SELECT jsonb_agg(to_jsonb(c) || jsonb_build_object('old_status', o."status", 'old_provider', o."provider"))
		INTO "changes"
		FROM "updated_channels" c JOIN "previous_channels" o USING ("notification_id", "channel")
		WHERE c."status" IS DISTINCT FROM o."status" OR c."provider" IS DISTINCT FROM o."provider";
	END IF;
	IF "changes" IS NULL THEN RETURN NULL; END IF;
	WITH "changed" AS (
		SELECT * FROM jsonb_to_recordset("changes") AS x(
			"notification_id" text, "channel" text, "status" text, "reason" text, "provider" text,
			"provider_id" text, "attempts" integer, "old_status" text, "old_provider" text)
	), "typed" AS (
		SELECT c.*, 'channel.' || c."status" AS "type", 1 AS "rank" FROM "changed" c
		WHERE c."status" IS DISTINCT FROM c."old_status"
			AND c."status" IN ('delivered', 'bounced', 'failed', 'expired', 'suppressed', 'unsettled', 'canceled')
		UNION ALL
		SELECT c.*, 'provider.switched', 0 FROM "changed" c
		WHERE c."old_provider" IS NOT NULL AND c."provider" IS NOT NULL AND c."provider" <> c."old_provider"
	), "events" AS (
		-- A data-modifying WITH runs to completion whether or not it is read.
		INSERT INTO "webhook_events" ("client_id", "type", "notification_id", "data")
		SELECT n."client_id", t."type", n."id", jsonb_build_object(
			'notification_id', n."id", 'client_id', n."client_id", 'user_id', n."user_id",
			'category', n."category", 'channel', t."channel", 'status', t."status", 'reason', t."reason",
			'provider', t."provider", 'provider_id', t."provider_id", 'attempt', t."attempts")
			|| CASE WHEN t."type" = 'provider.switched' THEN jsonb_build_object('previous_provider', t."old_provider") ELSE '{}'::jsonb END
		FROM "typed" t
		CROSS JOIN LATERAL (SELECT n."id", n."client_id", n."user_id", n."category" FROM "notifications" n
			WHERE n."id" = t."notification_id" OFFSET 0) n
		WHERE "webhook_wanted"(n."client_id", t."type")
		ORDER BY t."notification_id", t."channel", t."rank"
	)
	INSERT INTO "webhook_completion_checks" ("notification_id", "user_id")
	SELECT DISTINCT c."notification_id", n."user_id" FROM "changed" c
	CROSS JOIN LATERAL (SELECT n."client_id", n."user_id" FROM "notifications" n WHERE n."id" = c."notification_id" OFFSET 0) n
	WHERE c."status" IS DISTINCT FROM c."old_status"
		AND c."status" IN ('delivered', 'bounced', 'failed', 'expired', 'suppressed', 'canceled')
		AND ("webhook_wanted"(n."client_id", 'notification.completed')
			OR ("tallied" AND EXISTS (SELECT 1 FROM "broadcast_recipients" r
				JOIN "webhook_broadcast_tallies" t ON t."broadcast_id" = r."broadcast_id"
				WHERE r."notification_id" = c."notification_id" AND t."completed_at" IS NULL)))
	-- In key order, as every writer takes these rows.
	ORDER BY c."notification_id"
	-- A check already there is updated, not passed over: its row stays locked until this
	-- transaction commits, so the dispatcher (FOR UPDATE SKIP LOCKED) cannot take it, look at
	-- this notification while this channel's outcome is uncommitted, and drop the check. A check
	-- written before 0029 gains its user here.
	ON CONFLICT ("notification_id") DO UPDATE SET "user_id" = excluded."user_id";
	RETURN NULL;
END $$;
