-- The idempotency guard is partitioned by day, and a day of records is retired by dropping its
-- partition rather than by deleting its rows.
--
-- A claim at time t writes one row per UTC day that [t, t + window] overlaps (`slot`: the start of
-- the day; two rows for a 24-hour window), alike but for the slot. A claim or a read at t' looks in
-- the slot of its own day only: any claim still in the window at t' has a row there, so two claims
-- of one key meet on the key (client_id, key, slot) of one partition, and the unique index
-- serializes them as it did when the key was (client_id, key). Once a day has ended nothing claims
-- in its slot or reads it (later days' rows are written by the claims themselves), and its
-- partition can go.
--
-- The existing table is kept beside it as `idempotency_keys_legacy`, under its own key (no index is
-- built, nothing is copied: the migration is a few catalog changes under the table's lock). Claims
-- and reads consult it as well (a live record there holds its key), and nothing writes to it any
-- more; once its last record is past the window the processor's job empties it (TRUNCATE). A
-- process of the previous release still running after the migration fails its claims (its
-- ON CONFLICT names the old key) rather than claiming a key twice; its request answers an error,
-- which the client retries against a process of this release.
LOCK TABLE "idempotency_keys" IN ACCESS EXCLUSIVE MODE;--> statement-breakpoint
ALTER TABLE "idempotency_keys" RENAME TO "idempotency_keys_legacy";--> statement-breakpoint
ALTER TABLE "idempotency_keys_legacy" RENAME CONSTRAINT "idempotency_keys_client_id_key_pk" TO "idempotency_keys_legacy_client_id_key_pk";--> statement-breakpoint
ALTER INDEX "idempotency_keys_created_idx" RENAME TO "idempotency_keys_legacy_created_idx";--> statement-breakpoint
CREATE TABLE "idempotency_keys" (
	"client_id" text NOT NULL,
	"key" text NOT NULL,
	"slot" timestamptz NOT NULL,
	"request_hash" text NOT NULL,
	"notification_id" text NOT NULL,
	"created_at" timestamptz DEFAULT now() NOT NULL,
	CONSTRAINT "idempotency_keys_client_id_key_slot_pk" PRIMARY KEY ("client_id", "key", "slot")
) PARTITION BY RANGE ("slot");--> statement-breakpoint
-- Rows of a day without a partition (the job that makes them is late) land here; the partition is
-- made from them once the job runs, and the few left past the window are deleted in batches
-- (notify_idempotency_purge): bounded, and rare.
CREATE TABLE "idempotency_keys_default" PARTITION OF "idempotency_keys" DEFAULT;--> statement-breakpoint
-- The slot of a time: the start of its UTC day.
CREATE FUNCTION "notify_idempotency_slot"("at" timestamptz) RETURNS timestamptz IMMUTABLE STRICT LANGUAGE sql AS $$
	SELECT date_trunc('day', "at" AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
$$;--> statement-breakpoint
-- The slots after the day of `at` that a window from `at` overlaps, one per later UTC day (one for a
-- 24-hour window). PL/pgSQL with a fixed row estimate, never inlined: generate_series' estimate
-- is exact only for constant arguments, so a prepared statement's custom plans would always look
-- cheaper than its generic plan (PostgreSQL 16 and later), and the accept would be planned anew on
-- every run.
CREATE FUNCTION "notify_idempotency_later_slots"("at" timestamptz, "window" interval) RETURNS SETOF timestamptz
	IMMUTABLE STRICT LANGUAGE plpgsql ROWS 1 AS $$
BEGIN
	RETURN QUERY SELECT generate_series(notify_idempotency_slot("at") + interval '1 day',
		notify_idempotency_slot("at" + "window"), interval '1 day');
END $$;--> statement-breakpoint
-- A claim's rows after its own day's: `written` of them were written, and `window` asks for one per
-- later day the window overlaps. Fewer means another claim of the key holds a later day's slot: a
-- claim whose statement started later but got there first (two claims across midnight, in the
-- other order). The statement then fails as a whole (SQLSTATE NI030) rather than leave a row that
-- names a notification it does not store, and the caller runs it again: at its later time it meets
-- the other claim in its own day's slot.
CREATE FUNCTION "notify_idempotency_spread"("written" integer, "window" interval) RETURNS boolean
	VOLATILE LANGUAGE plpgsql AS $$
BEGIN
	IF "written" <> extract(epoch FROM notify_idempotency_slot(now() + "window") - notify_idempotency_slot(now()))::integer / 86400 THEN
		RAISE EXCEPTION 'another claim of the key holds a later slot' USING ERRCODE = 'NI030';
	END IF;
	RETURN true;
END $$;--> statement-breakpoint
-- Makes the guard's daily partitions (idempotency_keys_pYYYYMMDD) from the end of the last one (or
-- from today, when there is none) up to `through`; answers how many it made. Rows the default
-- partition took for a day being made move into its partition. Runs as the table's owner: an app's
-- role may call it but owns nothing. Callers set a lock_timeout: making a partition locks the table
-- for a moment.
CREATE FUNCTION "notify_idempotency_extend"("through" timestamptz) RETURNS integer
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
	"day" timestamptz;
	"name" text;
	"made" integer := 0;
BEGIN
	SELECT max(to_date(substr(c."relname", length('idempotency_keys_p') + 1), 'YYYYMMDD')::timestamp AT TIME ZONE 'UTC') + interval '1 day'
	INTO "day"
	FROM pg_inherits i JOIN pg_class c ON c."oid" = i."inhrelid"
	WHERE i."inhparent" = 'public.idempotency_keys'::regclass AND c."relname" ~ '^idempotency_keys_p[0-9]{8}$';
	"day" := coalesce("day", notify_idempotency_slot(now()));
	IF "day" >= "through" THEN RETURN 0; END IF;
	LOCK TABLE "idempotency_keys" IN ACCESS EXCLUSIVE MODE;
	WHILE "day" < "through" LOOP
		"name" := 'idempotency_keys_p' || to_char("day" AT TIME ZONE 'UTC', 'YYYYMMDD');
		CREATE TEMP TABLE "notify_moving" ON COMMIT DROP AS
			WITH m AS (DELETE FROM "idempotency_keys_default" WHERE "slot" >= "day" AND "slot" < "day" + interval '1 day' RETURNING *)
			SELECT * FROM m;
		EXECUTE format('CREATE TABLE %I PARTITION OF "idempotency_keys" FOR VALUES FROM (%L) TO (%L)',
			"name", "day", "day" + interval '1 day');
		EXECUTE format('INSERT INTO %I SELECT * FROM "notify_moving"', "name");
		DROP TABLE "notify_moving";
		"made" := "made" + 1;
		"day" := "day" + interval '1 day';
	END LOOP;
	RETURN "made";
END $$;--> statement-breakpoint
-- Drops the guard's partitions no statement reads or claims in any more, and answers how many: a
-- day's slot is claimed in and read only by statements whose time (now(), the start of their
-- transaction) is in that day, so its partition is done with once the day has ended; it goes an
-- hour later, for a transaction that started before midnight and is still running (an accept's
-- lasts well under a second). Live, the guard holds today's and tomorrow's partitions: each
-- keyed request's two rows for 24 to 48 hours. The
-- legacy table is emptied once its newest record is older than the window and that same day.
-- Callers set a lock_timeout: dropping a partition locks the table for a moment.
CREATE FUNCTION "notify_idempotency_retire"("window" interval) RETURNS integer
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
	"r" record;
	"dropped" integer := 0;
BEGIN
	FOR "r" IN SELECT c."relname" AS "name" FROM pg_inherits i JOIN pg_class c ON c."oid" = i."inhrelid"
		WHERE i."inhparent" = 'public.idempotency_keys'::regclass AND c."relname" ~ '^idempotency_keys_p[0-9]{8}$'
			AND (to_date(substr(c."relname", length('idempotency_keys_p') + 1), 'YYYYMMDD')::timestamp AT TIME ZONE 'UTC')
				+ interval '1 day 1 hour' <= now()
		ORDER BY c."relname" LOOP
		EXECUTE format('DROP TABLE %I', "r"."name");
		"dropped" := "dropped" + 1;
	END LOOP;
	IF EXISTS (SELECT 1 FROM "idempotency_keys_legacy")
		AND NOT EXISTS (SELECT 1 FROM "idempotency_keys_legacy" WHERE "created_at" >= now() - "window" - interval '1 day') THEN
		TRUNCATE "idempotency_keys_legacy";
	END IF;
	RETURN "dropped";
END $$;--> statement-breakpoint
-- Deletes up to `count` records past the window from the default partition (rows of days the job
-- had not made a partition for yet, whose day has passed); answers how many. Ingest calls it.
CREATE FUNCTION "notify_idempotency_purge"("window" interval, "count" integer) RETURNS integer
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
	"deleted" integer;
BEGIN
	DELETE FROM "idempotency_keys_default" WHERE ctid IN (
		SELECT ctid FROM "idempotency_keys_default" WHERE "created_at" < now() - "window" LIMIT "count");
	GET DIAGNOSTICS "deleted" = ROW_COUNT;
	RETURN "deleted";
END $$;--> statement-breakpoint
-- Today and the days a 24-hour window's claims write ahead, with three days to spare; the
-- processor's leader keeps them made ahead from here on.
SELECT "notify_idempotency_extend"(now() + interval '4 days');--> statement-breakpoint
-- Called by the processor's role (make, retire) and ingest's (purge) alone (libs/db/src/setup/roles.ts grants them).
REVOKE EXECUTE ON FUNCTION "notify_idempotency_extend"(timestamptz), "notify_idempotency_retire"(interval),
	"notify_idempotency_purge"(interval, integer) FROM PUBLIC;
