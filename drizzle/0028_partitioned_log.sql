-- The notification log (a notification, its channels, their status history, the provider
-- attempts and the fallback chain) is partitioned by range of the notification id: ids are
-- UUIDv7, whose text sorts by the millisecond they were made, so a day of notifications is a range
-- of ids and every statement that names a notification id reaches one partition. Retention then
-- retires a whole day at once (detach and drop) instead of deleting its rows one by one.
--
-- The five tables keep no foreign keys between them, nor from deferrals and digest items to the
-- notification: a key check per inserted row is work on the hot path, and a referenced partition
-- cannot be detached while anything still points into it. Their rows are written by the same
-- statements as before and retired together, partition by partition.
--
-- An existing table becomes its partitioned table's first partition (`<table>_p0`, every id before
-- this migration): renamed, attached (one scan of its ids under the migration's lock, no copy) and
-- retired by retention like any other once it is past the window. Partitions ahead of time are made
-- by notify_log_extend (here, and by the processor's leader every hour); a default partition takes
-- any row no range holds (an id of another shape, a restored or kept row of a retired range).
--
-- The service may keep running meanwhile: its statements on these tables wait for the migration
-- to commit. Its transactions lock the tables in orders of their own (a channel row, then its
-- history row; a deferral, then its channel), so the migration takes all its locks first, all at
-- once or none: a try that waits more than 50 ms for one table gives back those it holds, never
-- holding a table while waiting long for another (PostgreSQL would cancel one of the two as a
-- deadlock after deadlock_timeout). Between tries it waits for each table alone, holding no other
-- and giving it back at once (the block's exception undoes the lock): a waiter that holds nothing
-- takes part in no deadlock, and an autovacuum in its way is cancelled as for any other waiter.
DO $$
DECLARE
	"tables" text[] := ARRAY['notifications', 'notification_channels', 'channel_status_events', 'delivery_attempts',
		'notification_fallbacks', 'deferred_notifications', 'digest_items'];
	"saved" text := current_setting('lock_timeout');
	"deadline" timestamptz := clock_timestamp() + interval '5 minutes';
	"t" text;
BEGIN
	LOOP
		PERFORM set_config('lock_timeout', '50ms', true);
		BEGIN
			LOCK TABLE "notifications", "notification_channels", "channel_status_events", "delivery_attempts",
				"notification_fallbacks", "deferred_notifications", "digest_items" IN ACCESS EXCLUSIVE MODE;
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
				RAISE SQLSTATE 'NL028';
			EXCEPTION WHEN SQLSTATE 'NL028' THEN
				NULL;
			END;
		END LOOP;
	END LOOP;
	PERFORM set_config('lock_timeout', "saved", true);
END $$;--> statement-breakpoint
ALTER TABLE "channel_status_events" DROP CONSTRAINT "channel_status_events_notification_id_notifications_id_fk";--> statement-breakpoint
ALTER TABLE "deferred_notifications" DROP CONSTRAINT "deferred_notifications_notification_id_notifications_id_fk";--> statement-breakpoint
ALTER TABLE "delivery_attempts" DROP CONSTRAINT "delivery_attempts_notification_id_notifications_id_fk";--> statement-breakpoint
ALTER TABLE "digest_items" DROP CONSTRAINT "digest_items_notification_id_notifications_id_fk";--> statement-breakpoint
ALTER TABLE "notification_channels" DROP CONSTRAINT "notification_channels_notification_id_notifications_id_fk";--> statement-breakpoint
ALTER TABLE "notification_fallbacks" DROP CONSTRAINT "notification_fallbacks_notification_id_notifications_id_fk";--> statement-breakpoint
-- A partitioned table has no identity column in PostgreSQL 15: the status history's ids come from
-- a sequence that goes on from the identity's last id, and its key includes the partition key.
ALTER TABLE "channel_status_events" ALTER COLUMN "id" DROP IDENTITY;--> statement-breakpoint
CREATE SEQUENCE "public"."channel_status_events_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1;--> statement-breakpoint
SELECT setval('channel_status_events_id_seq', (SELECT coalesce(max("id"), 0) + 1 FROM "channel_status_events"), false);--> statement-breakpoint
ALTER TABLE "channel_status_events" ALTER COLUMN "id" SET DEFAULT nextval('channel_status_events_id_seq');--> statement-breakpoint
ALTER TABLE "channel_status_events" DROP CONSTRAINT "channel_status_events_pkey";--> statement-breakpoint
DROP INDEX "channel_status_events_channel_idx";--> statement-breakpoint
-- Its key's index is the migration's longest step on a large table: an operator may build it
-- beforehand without holding writes (CREATE UNIQUE INDEX CONCURRENTLY channel_status_events_key_idx
-- ON channel_status_events (notification_id, channel, id)), and it is taken as it is.
DO $$
BEGIN
	IF to_regclass('public.channel_status_events_key_idx') IS NOT NULL THEN
		ALTER TABLE "channel_status_events" ADD CONSTRAINT "channel_status_events_pkey" PRIMARY KEY USING INDEX "channel_status_events_key_idx";
	ELSE
		ALTER TABLE "channel_status_events" ADD CONSTRAINT "channel_status_events_pkey" PRIMARY KEY ("notification_id", "channel", "id");
	END IF;
END $$;--> statement-breakpoint
-- The statement triggers with transition tables go to the partitioned tables (a partition cannot
-- have one); their functions are unchanged.
DROP TRIGGER "webhook_notifications_accepted" ON "notifications";--> statement-breakpoint
DROP TRIGGER "webhook_channels_inserted" ON "notification_channels";--> statement-breakpoint
DROP TRIGGER "webhook_channels_updated" ON "notification_channels";--> statement-breakpoint
DROP TRIGGER "webhook_fallback_taken" ON "notification_fallbacks";--> statement-breakpoint
-- The first 13 characters of a UUIDv7 (its 48-bit millisecond timestamp) as a time, and the
-- lowest id of a millisecond: a partition's bounds, in both directions.
CREATE FUNCTION "notify_log_time"("id" text) RETURNS timestamptz IMMUTABLE STRICT LANGUAGE sql AS $$
	SELECT to_timestamp(('x' || lpad(replace(substr("id", 1, 13), '-', ''), 16, '0'))::bit(64)::bigint / 1000.0)
$$;--> statement-breakpoint
CREATE FUNCTION "notify_log_bound"("at" timestamptz) RETURNS text IMMUTABLE STRICT LANGUAGE sql AS $$
	SELECT overlay(lpad(to_hex(floor(extract(epoch FROM "at") * 1000)::bigint), 12, '0') PLACING '-' FROM 9 FOR 0)
		|| '-0000-0000-000000000000'
$$;--> statement-breakpoint
DO $$
DECLARE
	"tables" text[] := ARRAY['notifications', 'notification_channels', 'channel_status_events', 'delivery_attempts', 'notification_fallbacks'];
	"keys" text[] := ARRAY['id', 'notification_id', 'notification_id', 'notification_id', 'notification_id'];
	"cut" text := "notify_log_bound"(now());
	"t" text;
	"r" record;
BEGIN
	FOR i IN 1 .. array_length("tables", 1) LOOP
		"t" := "tables"[i];
		EXECUTE format('ALTER TABLE %I RENAME TO %I', "t", "t" || '_p0');
		EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (%I)',
			"t", "t" || '_p0', "keys"[i]);
		-- The keys and indexes under their own names on the partitioned table; the old table's
		-- are renamed and then attached to them (same definition: nothing is built again).
		FOR "r" IN SELECT c."conname", pg_get_constraintdef(c."oid") AS "def" FROM pg_constraint c
			WHERE c."conrelid" = ("t" || '_p0')::regclass AND c."contype" IN ('p', 'u') LOOP
			EXECUTE format('ALTER TABLE %I RENAME CONSTRAINT %I TO %I', "t" || '_p0', "r"."conname", "r"."conname" || '_p0');
			EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I %s', "t", "r"."conname", "r"."def");
		END LOOP;
		FOR "r" IN SELECT x."relname" AS "name", pg_get_indexdef(i."indexrelid") AS "def" FROM pg_index i
			JOIN pg_class x ON x."oid" = i."indexrelid"
			WHERE i."indrelid" = ("t" || '_p0')::regclass
				AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c."conindid" = i."indexrelid") LOOP
			EXECUTE format('ALTER INDEX %I RENAME TO %I', "r"."name", "r"."name" || '_p0');
			EXECUTE replace("r"."def", format(' ON public.%I ', "t" || '_p0'), format(' ON public.%I ', "t"));
		END LOOP;
		-- Rows at or past the cut (an id of another shape, a clock ahead) go to the default partition.
		EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', "t" || '_default', "t");
		EXECUTE format('WITH m AS (DELETE FROM %I WHERE %I >= %L RETURNING *) INSERT INTO %I SELECT * FROM m',
			"t" || '_p0', "keys"[i], "cut", "t" || '_default');
		EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%L)', "t", "t" || '_p0', "cut");
	END LOOP;
END $$;--> statement-breakpoint
ALTER SEQUENCE "channel_status_events_id_seq" OWNED BY "channel_status_events"."id";--> statement-breakpoint
CREATE TRIGGER "webhook_notifications_accepted" AFTER INSERT ON "notifications"
	REFERENCING NEW TABLE AS "accepted_notifications" FOR EACH STATEMENT EXECUTE FUNCTION "webhook_notifications_accepted"();--> statement-breakpoint
CREATE TRIGGER "webhook_channels_inserted" AFTER INSERT ON "notification_channels"
	REFERENCING NEW TABLE AS "inserted_channels" FOR EACH STATEMENT EXECUTE FUNCTION "webhook_channel_events"();--> statement-breakpoint
CREATE TRIGGER "webhook_channels_updated" AFTER UPDATE ON "notification_channels"
	REFERENCING OLD TABLE AS "previous_channels" NEW TABLE AS "updated_channels" FOR EACH STATEMENT EXECUTE FUNCTION "webhook_channel_events"();--> statement-breakpoint
CREATE TRIGGER "webhook_fallback_taken" AFTER UPDATE ON "notification_fallbacks"
	REFERENCING OLD TABLE AS "previous_fallbacks" NEW TABLE AS "updated_fallbacks" FOR EACH STATEMENT EXECUTE FUNCTION "webhook_fallback_taken"();--> statement-breakpoint
-- The log's range partitions (the notifications table's; the other four have the same ranges under
-- the same suffix), with their bounds as ids and as times; null bounds: MINVALUE (the first) or none
-- (the default partition).
CREATE VIEW "notify_log_partitions" AS
	SELECT substr(c."relname", length('notifications') + 1) AS "suffix", b."from_id", b."to_id",
		"notify_log_time"(b."from_id") AS "from_at", "notify_log_time"(b."to_id") AS "to_at",
		e."bound" = 'DEFAULT' AS "is_default"
	FROM pg_inherits i
	JOIN pg_class c ON c."oid" = i."inhrelid"
	CROSS JOIN LATERAL (SELECT pg_get_expr(c."relpartbound", c."oid") AS "bound") e
	CROSS JOIN LATERAL (SELECT (regexp_match(e."bound", 'FROM \(''([^'']*)''\)'))[1] AS "from_id",
		(regexp_match(e."bound", 'TO \(''([^'']*)''\)'))[1] AS "to_id") b
	WHERE i."inhparent" = 'public.notifications'::regclass;--> statement-breakpoint
-- Makes the log's partitions, `width` wide and aligned to it (from 2000-01-01 UTC), from the end of
-- the last one (or, when the log has none, from `since`, now by default) up to `through`, for all
-- five tables; answers how many ranges it made. Rows the
-- default partition took for a range being made (the job was behind) move into its partitions,
-- straight into each partition so that no trigger of the partitioned table fires again. Runs as
-- the tables' owner: an app's role may call it but owns nothing. Callers set a lock_timeout: making
-- a partition locks the partitioned table for a moment.
CREATE FUNCTION "notify_log_extend"("through" timestamptz, "width" interval, "since" timestamptz DEFAULT NULL) RETURNS integer
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
	"tables" text[] := ARRAY['notifications', 'notification_channels', 'channel_status_events', 'delivery_attempts', 'notification_fallbacks'];
	"keys" text[] := ARRAY['id', 'notification_id', 'notification_id', 'notification_id', 'notification_id'];
	"origin" timestamptz := timestamptz '2000-01-01 00:00:00+00';
	"lo_at" timestamptz;
	"hi_at" timestamptz;
	"suffix" text;
	"made" integer := 0;
BEGIN
	IF "width" < interval '1 hour' OR "width" > interval '31 days' THEN
		RAISE EXCEPTION 'partition width % is outside 1 hour to 31 days', "width";
	END IF;
	SELECT max("to_at") INTO "lo_at" FROM "notify_log_partitions";
	IF "lo_at" IS NULL THEN "lo_at" := date_bin("width", coalesce("since", now()), "origin"); END IF;
	WHILE "lo_at" < "through" LOOP
		"hi_at" := date_bin("width", "lo_at", "origin") + "width";
		"suffix" := '_p' || to_char("lo_at" AT TIME ZONE 'UTC', 'YYYYMMDD')
			|| CASE WHEN ("lo_at" AT TIME ZONE 'UTC')::time = '00:00' THEN '' ELSE to_char("lo_at" AT TIME ZONE 'UTC', '"_"HH24MISS') END;
		FOR i IN 1 .. array_length("tables", 1) LOOP
			EXECUTE format('CREATE TEMP TABLE "notify_moving" ON COMMIT DROP AS WITH m AS (DELETE FROM %I WHERE %I >= %L AND %I < %L RETURNING *) SELECT * FROM m',
				"tables"[i] || '_default', "keys"[i], "notify_log_bound"("lo_at"), "keys"[i], "notify_log_bound"("hi_at"));
			EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
				"tables"[i] || "suffix", "tables"[i], "notify_log_bound"("lo_at"), "notify_log_bound"("hi_at"));
			EXECUTE format('INSERT INTO %I SELECT * FROM "notify_moving"', "tables"[i] || "suffix");
			DROP TABLE "notify_moving";
		END LOOP;
		"made" := "made" + 1;
		"lo_at" := "hi_at";
	END LOOP;
	RETURN "made";
END $$;--> statement-breakpoint
SELECT "notify_log_extend"(now() + interval '7 days', interval '1 day');
--> statement-breakpoint
-- Takes a range partition out of the log: detaches it from all five tables, moves the rows that
-- must outlive it into the default partitions (a notification still in the publish outbox, with a
-- deferral, or in a digest not sent yet: work still to do), and removes the digest items of sent
-- digests that pointed into it. The detached tables are then read by notify_log_archive_lines and
-- dropped by notify_log_drop; nothing writes to them any more. Answers how many notifications it kept.
CREATE FUNCTION "notify_log_detach"("suffix" text) RETURNS integer
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
	"tables" text[] := ARRAY['notifications', 'notification_channels', 'channel_status_events', 'delivery_attempts', 'notification_fallbacks'];
	"keys" text[] := ARRAY['id', 'notification_id', 'notification_id', 'notification_id', 'notification_id'];
	"part" record;
	"kept" integer;
BEGIN
	SELECT * INTO "part" FROM "notify_log_partitions" p WHERE p."suffix" = "notify_log_detach"."suffix" AND NOT p."is_default";
	IF NOT FOUND THEN RAISE EXCEPTION 'the log has no range partition %', "suffix"; END IF;
	FOR i IN 1 .. array_length("tables", 1) LOOP
		EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', "tables"[i], "tables"[i] || "suffix");
	END LOOP;
	EXECUTE format('CREATE TEMP TABLE "notify_kept" ON COMMIT DROP AS SELECT n."id" FROM %I n
		WHERE EXISTS (SELECT 1 FROM "publish_outbox" o WHERE n."id" = ANY(o."notification_ids"))
			OR EXISTS (SELECT 1 FROM "deferred_notifications" d WHERE d."notification_id" = n."id")
			OR EXISTS (SELECT 1 FROM "digest_items" i JOIN "digests" d ON d."id" = i."digest_id"
				WHERE i."notification_id" = n."id" AND d."status" <> ''sent'')', 'notifications' || "suffix");
	FOR i IN 1 .. array_length("tables", 1) LOOP
		EXECUTE format('INSERT INTO %I SELECT p.* FROM %I p WHERE p.%I IN (SELECT "id" FROM "notify_kept")',
			"tables"[i] || '_default', "tables"[i] || "suffix", "keys"[i]);
		EXECUTE format('DELETE FROM %I p WHERE p.%I IN (SELECT "id" FROM "notify_kept")', "tables"[i] || "suffix", "keys"[i]);
	END LOOP;
	DELETE FROM "digest_items" i USING "digests" d
	WHERE d."id" = i."digest_id" AND d."status" = 'sent'
		AND i."notification_id" >= coalesce("part"."from_id", '') AND i."notification_id" < "part"."to_id";
	SELECT count(*) INTO "kept" FROM "notify_kept";
	DROP TABLE "notify_kept";
	RETURN "kept";
END $$;--> statement-breakpoint
-- The log's detached partitions, waiting to be archived and dropped (a crash between the two
-- leaves them here for the next run).
CREATE VIEW "notify_log_detached" AS
	SELECT substr(c."relname", length('notifications') + 1) AS "suffix"
	FROM pg_class c JOIN pg_namespace s ON s."oid" = c."relnamespace"
	WHERE s."nspname" = 'public' AND c."relkind" = 'r' AND NOT c."relispartition"
		AND c."relname" ~ '^notifications_p[0-9]';--> statement-breakpoint
-- A detached partition's notifications in id order after `after`, each as one archive record
-- (the same shape as retention's row-by-row archive: the row and its channels, history, attempts
-- and fallback chain, each as PostgreSQL's own JSON of the row).
CREATE FUNCTION "notify_log_archive_lines"("suffix" text, "after" text, "count" integer)
	RETURNS TABLE ("id" text, "created_at" timestamptz, "line" text)
	LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM "notify_log_detached" d WHERE d."suffix" = "notify_log_archive_lines"."suffix") THEN
		RAISE EXCEPTION 'no detached log partition %', "suffix";
	END IF;
	RETURN QUERY EXECUTE format('SELECT n."id", n."created_at", json_build_object(
			''version'', 1,
			''notification'', to_json(n),
			''channels'', (SELECT coalesce(json_agg(c), ''[]'') FROM %I c WHERE c."notification_id" = n."id"),
			''status_events'', (SELECT coalesce(json_agg(e ORDER BY e."id"), ''[]'') FROM %I e WHERE e."notification_id" = n."id"),
			''attempts'', (SELECT coalesce(json_agg(a), ''[]'') FROM %I a WHERE a."notification_id" = n."id"),
			''fallbacks'', (SELECT coalesce(json_agg(f), ''[]'') FROM %I f WHERE f."notification_id" = n."id")
		)::text
		FROM %I n WHERE n."id" > $1 ORDER BY n."id" LIMIT $2',
		'notification_channels' || "suffix", 'channel_status_events' || "suffix", 'delivery_attempts' || "suffix",
		'notification_fallbacks' || "suffix", 'notifications' || "suffix")
	USING "after", "count";
END $$;--> statement-breakpoint
-- Drops a detached partition's five tables (only detached ones: never a live partition).
CREATE FUNCTION "notify_log_drop"("suffix" text) RETURNS void
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
	"tables" text[] := ARRAY['notifications', 'notification_channels', 'channel_status_events', 'delivery_attempts', 'notification_fallbacks'];
BEGIN
	IF NOT EXISTS (SELECT 1 FROM "notify_log_detached" d WHERE d."suffix" = "notify_log_drop"."suffix") THEN
		RAISE EXCEPTION 'no detached log partition %', "suffix";
	END IF;
	FOR i IN 1 .. array_length("tables", 1) LOOP
		EXECUTE format('DROP TABLE IF EXISTS %I', "tables"[i] || "suffix");
	END LOOP;
END $$;
--> statement-breakpoint
-- Called by the processor's role alone (libs/db/src/setup/roles.ts grants it).
REVOKE EXECUTE ON FUNCTION "notify_log_extend"(timestamptz, interval, timestamptz), "notify_log_detach"(text),
	"notify_log_archive_lines"(text, text, integer), "notify_log_drop"(text) FROM PUBLIC;
--> statement-breakpoint
-- A channel's events and completion checks name its notification's client: each changed
-- channel's notification is looked up by its id (a lateral subquery kept as it is), which reaches
-- its own partition of the log. Joined as a set, the statement's plan hashes the notifications of
-- every partition on each status move while any endpoint is enabled. 0026's function otherwise.
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
	INSERT INTO "webhook_completion_checks" ("notification_id")
	SELECT DISTINCT c."notification_id" FROM "changed" c
	CROSS JOIN LATERAL (SELECT n."client_id" FROM "notifications" n WHERE n."id" = c."notification_id" OFFSET 0) n
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
	-- this notification while this channel's outcome is uncommitted, and drop the check.
	ON CONFLICT ("notification_id") DO UPDATE SET "notification_id" = excluded."notification_id";
	RETURN NULL;
END $$;
