-- Provider receipts, inbox items and broadcast recipients join the notification log's partitions:
-- partitioned by range of the notification id they belong to, with the log's bounds and suffixes,
-- made ahead by notify_log_extend and retired by notify_log_detach with the log's day. Each row
-- names one notification: an inbox item is its in-app copy, a broadcast recipient the broadcast's
-- notification for one user, and a receipt the provider's event of a message sent for it
-- (SendGrid's custom args and Plivo's report URL carry the id: a receipt and every retry of it name
-- the same notification, `notification_id`, taken from the payload by the receipts app). A receipt
-- that names none has a null key and lives in the default partition.
--
-- The keys include the partition key: a receipt is unique by (notification_id, event_id, provider),
-- nulls equal (so a receipt that names no notification is still stored once per event); an inbox
-- item by its notification (its id comes from a sequence: a partitioned table has no identity
-- column in PostgreSQL 15); a broadcast recipient by its notification (one notification per user
-- and broadcast is the expander's cursor's to hold).
--
-- Each existing table becomes its partitioned table's first partition, `<table>_p0`, as in 0028:
-- renamed and attached (one scan of its keys under the lock, no copy). It holds every id up to the
-- end of the log's range of the migration's moment, and is retired with that range (the log's
-- earlier ranges retire without it). Receipts from before this migration name no notification
-- (`notification_id` is '': in the first partition) but for those of the last 3 days (the
-- providers' retries of them must find them by their key), which are given theirs.
--
-- The locks: all three tables at once or none, as 0028 takes the log's (see there).
DO $$
DECLARE
	"tables" text[] := ARRAY['provider_receipts', 'inbox_items', 'broadcast_recipients'];
	"saved" text := current_setting('lock_timeout');
	"deadline" timestamptz := clock_timestamp() + interval '5 minutes';
	"t" text;
BEGIN
	LOOP
		PERFORM set_config('lock_timeout', '50ms', true);
		BEGIN
			LOCK TABLE "provider_receipts", "inbox_items", "broadcast_recipients" IN ACCESS EXCLUSIVE MODE;
			EXIT;
		EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
			NULL;
		END;
		IF clock_timestamp() > "deadline" THEN
			RAISE EXCEPTION 'receipts, inbox items and broadcast recipients stayed busy for 5 minutes; nothing was changed: run the migration again';
		END IF;
		PERFORM set_config('lock_timeout', "saved", true);
		FOREACH "t" IN ARRAY "tables" LOOP
			BEGIN
				EXECUTE format('LOCK TABLE %I IN ACCESS EXCLUSIVE MODE', "t");
				RAISE SQLSTATE 'NL031';
			EXCEPTION WHEN SQLSTATE 'NL031' THEN
				NULL;
			END;
		END LOOP;
	END LOOP;
	PERFORM set_config('lock_timeout', "saved", true);
END $$;--> statement-breakpoint
-- '' for every existing receipt without a rewrite (a default stored once in the catalog), none
-- for the receipts written from here on.
ALTER TABLE "provider_receipts" ADD COLUMN "notification_id" text DEFAULT '';--> statement-breakpoint
ALTER TABLE "provider_receipts" ALTER COLUMN "notification_id" DROP DEFAULT;--> statement-breakpoint
UPDATE "provider_receipts" SET "notification_id" =
	CASE WHEN jsonb_typeof("payload" -> 'notification_id') = 'string' THEN "payload" ->> 'notification_id' END
WHERE "received_at" >= now() - interval '3 days';--> statement-breakpoint
ALTER TABLE "provider_receipts" DROP CONSTRAINT "provider_receipts_event_id_provider_pk";--> statement-breakpoint
-- The receipts' key is built here (its column is this migration's); the two plain indexes below
-- an operator may build beforehand without holding writes (CREATE INDEX CONCURRENTLY IF NOT
-- EXISTS with these names and columns), and they are taken as they are.
ALTER TABLE "provider_receipts" ADD CONSTRAINT "provider_receipts_event_key" UNIQUE NULLS NOT DISTINCT ("notification_id", "event_id", "provider");--> statement-breakpoint
ALTER TABLE "inbox_items" ALTER COLUMN "id" DROP IDENTITY;--> statement-breakpoint
CREATE SEQUENCE "public"."inbox_items_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1;--> statement-breakpoint
SELECT setval('inbox_items_id_seq', (SELECT coalesce(max("id"), 0) + 1 FROM "inbox_items"), false);--> statement-breakpoint
ALTER TABLE "inbox_items" ALTER COLUMN "id" SET DEFAULT nextval('inbox_items_id_seq');--> statement-breakpoint
ALTER TABLE "inbox_items" DROP CONSTRAINT "inbox_items_pkey";--> statement-breakpoint
-- Items by id alone: the pollers' highest id and the items after one.
CREATE INDEX IF NOT EXISTS "inbox_items_id_idx" ON "inbox_items" USING btree ("id");--> statement-breakpoint
ALTER TABLE "broadcast_recipients" DROP CONSTRAINT "broadcast_recipients_broadcast_id_user_id_pk";--> statement-breakpoint
-- The inbox's statement trigger with transition tables goes to the partitioned table (as 0028's
-- do); its function is unchanged.
DROP TRIGGER "webhook_inbox_read" ON "inbox_items";--> statement-breakpoint
-- A broadcast's recipients (its progress, its tallies), in the order of its members.
CREATE INDEX IF NOT EXISTS "broadcast_recipients_broadcast_idx" ON "broadcast_recipients" USING btree ("broadcast_id", "user_id");--> statement-breakpoint
-- The log's range holding the migration's moment (made first if the log has none: its extend job
-- was behind), whose end is the end of the first partitions.
DO $$
DECLARE
	"width" interval;
BEGIN
	IF NOT EXISTS (SELECT 1 FROM "notify_log_partitions" p WHERE NOT p."is_default"
			AND coalesce(p."from_id", '') COLLATE "C" <= "notify_log_bound"(now()) AND p."to_id" COLLATE "C" > "notify_log_bound"(now())) THEN
		SELECT coalesce(max(p."to_at" - p."from_at"), interval '1 day') INTO "width" FROM "notify_log_partitions" p
		WHERE NOT p."is_default" AND p."from_at" IS NOT NULL AND p."to_at" - p."from_at" >= interval '1 hour';
		PERFORM "notify_log_extend"(now() + "width", "width");
	END IF;
END $$;--> statement-breakpoint
DO $$
DECLARE
	"tables" text[] := ARRAY['provider_receipts', 'inbox_items', 'broadcast_recipients'];
	"cut" text := (SELECT p."to_id" FROM "notify_log_partitions" p WHERE NOT p."is_default"
		AND coalesce(p."from_id", '') COLLATE "C" <= "notify_log_bound"(now()) AND p."to_id" COLLATE "C" > "notify_log_bound"(now()));
	"t" text;
	"r" record;
	"range" record;
BEGIN
	IF "cut" IS NULL THEN RAISE EXCEPTION 'the log has no partition for now'; END IF;
	FOREACH "t" IN ARRAY "tables" LOOP
		EXECUTE format('ALTER TABLE %I RENAME TO %I', "t", "t" || '_p0');
		EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE ("notification_id")',
			"t", "t" || '_p0');
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
		-- Rows past the cut (a clock ahead, an id of another shape) or naming no notification go to
		-- the default partition; the log's ranges after the cut are made, taking theirs from it.
		EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', "t" || '_default', "t");
		EXECUTE format('WITH m AS (DELETE FROM %I WHERE "notification_id" IS NULL OR "notification_id" >= %L RETURNING *) INSERT INTO %I SELECT * FROM m',
			"t" || '_p0', "cut", "t" || '_default');
		EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%L)', "t", "t" || '_p0', "cut");
		FOR "range" IN SELECT * FROM "notify_log_partitions" l WHERE NOT l."is_default" AND l."from_id" COLLATE "C" >= "cut" ORDER BY l."to_id" LOOP
			EXECUTE format('CREATE TEMP TABLE "notify_moving" ON COMMIT DROP AS WITH m AS (DELETE FROM %I WHERE "notification_id" >= %L AND "notification_id" < %L RETURNING *) SELECT * FROM m',
				"t" || '_default', "range"."from_id", "range"."to_id");
			EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', "t" || "range"."suffix", "t", "range"."from_id", "range"."to_id");
			EXECUTE format('INSERT INTO %I SELECT * FROM "notify_moving"', "t" || "range"."suffix");
			DROP TABLE "notify_moving";
		END LOOP;
	END LOOP;
END $$;--> statement-breakpoint
ALTER SEQUENCE "inbox_items_id_seq" OWNED BY "inbox_items"."id";--> statement-breakpoint
CREATE TRIGGER "webhook_inbox_read" AFTER UPDATE ON "inbox_items"
	REFERENCING OLD TABLE AS "previous_items" NEW TABLE AS "updated_items" FOR EACH STATEMENT EXECUTE FUNCTION "webhook_inbox_read"();--> statement-breakpoint
-- As 0028's, for all eight tables.
CREATE OR REPLACE FUNCTION "notify_log_extend"("through" timestamptz, "width" interval, "since" timestamptz DEFAULT NULL) RETURNS integer
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
	"tables" text[] := ARRAY['notifications', 'notification_channels', 'channel_status_events', 'delivery_attempts', 'notification_fallbacks',
		'provider_receipts', 'inbox_items', 'broadcast_recipients'];
	"keys" text[] := ARRAY['id', 'notification_id', 'notification_id', 'notification_id', 'notification_id',
		'notification_id', 'notification_id', 'notification_id'];
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
-- As 0028's, for all eight tables. Receipts, inbox items and broadcast recipients have no
-- partitions of the log's ranges from before 0031: a range of theirs is detached when the log's
-- range it ends with retires (their first partition, ending later than the log's, with the range
-- it ends with), under that range's suffix; until then the rows of the log's earlier ranges stay
-- live in it (archived with their notifications all the same: notify_log_archive_lines). A
-- detached table's rows whose notification is still live (in the default partition: kept by
-- this detach or by an earlier one) move to their default partitions: a kept notification's
-- receipts (applied or waiting for their send), its inbox item (read or not) and its broadcast
-- recipient stay with it. Every other receipt waiting for its send goes with the day: its channel
-- goes too, so nothing is left for it to apply to.
CREATE OR REPLACE FUNCTION "notify_log_detach"("suffix" text) RETURNS integer
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
	"tables" text[] := ARRAY['notifications', 'notification_channels', 'channel_status_events', 'delivery_attempts', 'notification_fallbacks'];
	"keys" text[] := ARRAY['id', 'notification_id', 'notification_id', 'notification_id', 'notification_id'];
	"joined" text[] := ARRAY['provider_receipts', 'inbox_items', 'broadcast_recipients'];
	"part" record;
	"r" record;
	"kept" integer;
BEGIN
	SELECT * INTO "part" FROM "notify_log_partitions" p WHERE p."suffix" = "notify_log_detach"."suffix" AND NOT p."is_default";
	IF NOT FOUND THEN RAISE EXCEPTION 'the log has no range partition %', "suffix"; END IF;
	FOR i IN 1 .. array_length("tables", 1) LOOP
		EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', "tables"[i], "tables"[i] || "suffix");
	END LOOP;
	FOR i IN 1 .. array_length("joined", 1) LOOP
		FOR "r" IN SELECT c."relname"::text AS "name" FROM pg_inherits h JOIN pg_class c ON c."oid" = h."inhrelid"
			CROSS JOIN LATERAL (SELECT (regexp_match(pg_get_expr(c."relpartbound", c."oid"), 'TO \(''([^'']*)''\)'))[1] AS "to_id") b
			WHERE h."inhparent" = ('public.' || "joined"[i])::regclass AND b."to_id" COLLATE "C" <= "part"."to_id"
			ORDER BY b."to_id" COLLATE "C" DESC LOOP
			EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', "joined"[i], "r"."name");
			IF "r"."name" <> "joined"[i] || "suffix" THEN
				IF to_regclass('public.' || "joined"[i] || "suffix") IS NULL THEN
					EXECUTE format('ALTER TABLE %I RENAME TO %I', "r"."name", "joined"[i] || "suffix");
				ELSE
					EXECUTE format('INSERT INTO %I SELECT * FROM %I', "joined"[i] || "suffix", "r"."name");
					EXECUTE format('DROP TABLE %I', "r"."name");
				END IF;
			END IF;
		END LOOP;
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
	FOR i IN 1 .. array_length("joined", 1) LOOP
		-- Only a table this detach took out (their first partition, while still attached, has the
		-- suffix of the log's first partition).
		IF EXISTS (SELECT 1 FROM pg_class c WHERE c."oid" = to_regclass('public.' || "joined"[i] || "suffix") AND NOT c."relispartition") THEN
			EXECUTE format('INSERT INTO %I SELECT p.* FROM %I p WHERE p."notification_id" IN (SELECT "id" FROM "notifications_default")',
				"joined"[i] || '_default', "joined"[i] || "suffix");
			EXECUTE format('DELETE FROM %I p WHERE p."notification_id" IN (SELECT "id" FROM "notifications_default")', "joined"[i] || "suffix");
		END IF;
	END LOOP;
	DELETE FROM "digest_items" i USING "digests" d
	WHERE d."id" = i."digest_id" AND d."status" = 'sent'
		AND i."notification_id" >= coalesce("part"."from_id", '') AND i."notification_id" < "part"."to_id";
	SELECT count(*) INTO "kept" FROM "notify_kept";
	DROP TABLE "notify_kept";
	RETURN "kept";
END $$;--> statement-breakpoint
-- As 0028's, with each notification's receipts (in the order they came) and its inbox item (null
-- when it has none): from their tables detached with the range or, while their partition that
-- holds the range is still live (their first partition, which ends later than the log's), from
-- the live tables (each notification's own partition). Broadcast recipients are not
-- archived: a recipient row says which broadcast a notification was for, and the notification's
-- own dedup key (`broadcast:<id>:<user>`) says it too. Receipts that name no notification of the
-- range (never matched to a send, another deployment's) are in no one's history and are not
-- archived.
CREATE OR REPLACE FUNCTION "notify_log_archive_lines"("suffix" text, "after" text, "count" integer)
	RETURNS TABLE ("id" text, "created_at" timestamptz, "line" text)
	LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
	"receipts" text := 'provider_receipts';
	"inbox" text := 'inbox_items';
BEGIN
	IF NOT EXISTS (SELECT 1 FROM "notify_log_detached" d WHERE d."suffix" = "notify_log_archive_lines"."suffix") THEN
		RAISE EXCEPTION 'no detached log partition %', "suffix";
	END IF;
	IF EXISTS (SELECT 1 FROM pg_class c WHERE c."oid" = to_regclass('public.provider_receipts' || "suffix") AND NOT c."relispartition") THEN
		"receipts" := 'provider_receipts' || "suffix";
	END IF;
	IF EXISTS (SELECT 1 FROM pg_class c WHERE c."oid" = to_regclass('public.inbox_items' || "suffix") AND NOT c."relispartition") THEN
		"inbox" := 'inbox_items' || "suffix";
	END IF;
	"receipts" := format('(SELECT coalesce(json_agg(r ORDER BY r."received_at", r."event_id"), ''[]'') FROM %I r WHERE r."notification_id" = n."id")',
		"receipts");
	"inbox" := format('(SELECT to_json(i) FROM %I i WHERE i."notification_id" = n."id")', "inbox");
	RETURN QUERY EXECUTE format('SELECT n."id", n."created_at", json_build_object(
			''version'', 1,
			''notification'', to_json(n),
			''channels'', (SELECT coalesce(json_agg(c), ''[]'') FROM %I c WHERE c."notification_id" = n."id"),
			''status_events'', (SELECT coalesce(json_agg(e ORDER BY e."id"), ''[]'') FROM %I e WHERE e."notification_id" = n."id"),
			''attempts'', (SELECT coalesce(json_agg(a), ''[]'') FROM %I a WHERE a."notification_id" = n."id"),
			''fallbacks'', (SELECT coalesce(json_agg(f), ''[]'') FROM %I f WHERE f."notification_id" = n."id"),
			''receipts'', %s,
			''inbox_item'', %s
		)::text
		FROM %I n WHERE n."id" > $1 ORDER BY n."id" LIMIT $2',
		'notification_channels' || "suffix", 'channel_status_events' || "suffix", 'delivery_attempts' || "suffix",
		'notification_fallbacks' || "suffix", "receipts", "inbox", 'notifications' || "suffix")
	USING "after", "count";
END $$;--> statement-breakpoint
-- As 0028's, for all eight tables: only tables that are detached (the first partition of the
-- receipts, inbox items and broadcast recipients, attached while the log's first partition is
-- dropped, has its suffix).
CREATE OR REPLACE FUNCTION "notify_log_drop"("suffix" text) RETURNS void
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
	"tables" text[] := ARRAY['notifications', 'notification_channels', 'channel_status_events', 'delivery_attempts', 'notification_fallbacks',
		'provider_receipts', 'inbox_items', 'broadcast_recipients'];
BEGIN
	IF NOT EXISTS (SELECT 1 FROM "notify_log_detached" d WHERE d."suffix" = "notify_log_drop"."suffix") THEN
		RAISE EXCEPTION 'no detached log partition %', "suffix";
	END IF;
	FOR i IN 1 .. array_length("tables", 1) LOOP
		IF EXISTS (SELECT 1 FROM pg_class c WHERE c."oid" = to_regclass('public.' || "tables"[i] || "suffix") AND NOT c."relispartition") THEN
			EXECUTE format('DROP TABLE %I', "tables"[i] || "suffix");
		END IF;
	END LOOP;
END $$;
