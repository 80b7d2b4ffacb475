CREATE TABLE "webhook_broadcast_tallies" (
	"broadcast_id" text PRIMARY KEY NOT NULL,
	"client_id" text NOT NULL,
	"ended" bigint DEFAULT 0 NOT NULL,
	"completed" bigint DEFAULT 0 NOT NULL,
	"partially_failed" bigint DEFAULT 0 NOT NULL,
	"failed" bigint DEFAULT 0 NOT NULL,
	"suppressed" bigint DEFAULT 0 NOT NULL,
	"check_due" boolean DEFAULT false NOT NULL,
	"completed_at" timestamp with time zone
);
--> statement-breakpoint
DROP INDEX "webhook_deliveries_due_idx";--> statement-breakpoint
ALTER TABLE "webhook_endpoints" ADD COLUMN "include" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
CREATE INDEX "webhook_broadcast_tallies_due_idx" ON "webhook_broadcast_tallies" USING btree ("broadcast_id") WHERE "webhook_broadcast_tallies"."check_due";--> statement-breakpoint
CREATE INDEX "webhook_broadcast_tallies_open_idx" ON "webhook_broadcast_tallies" USING btree ("broadcast_id") WHERE "webhook_broadcast_tallies"."completed_at" is null;--> statement-breakpoint
CREATE INDEX "webhook_completion_checks_created_idx" ON "webhook_completion_checks" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "webhook_deliveries_queued_idx" ON "webhook_deliveries" USING btree ("endpoint_id") WHERE "webhook_deliveries"."status" = 'queued';--> statement-breakpoint
CREATE UNIQUE INDEX "webhook_events_broadcast_completed_idx" ON "webhook_events" USING btree (("data"->>'broadcast_id')) WHERE "webhook_events"."type" = 'broadcast.completed';--> statement-breakpoint
CREATE INDEX "webhook_deliveries_due_idx" ON "webhook_deliveries" USING btree ("endpoint_id","next_attempt_at") WHERE "webhook_deliveries"."status" in ('waiting', 'queued');--> statement-breakpoint
-- A channel's outcome also asks for a completion check when its notification is a recipient of a
-- broadcast whose completion is awaited (a tally exists): the dispatcher counts it there.
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
			AND c."status" IN ('delivered', 'bounced', 'failed', 'expired', 'suppressed', 'unsettled')
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
		JOIN "notifications" n ON n."id" = t."notification_id"
		WHERE "webhook_wanted"(n."client_id", t."type")
		ORDER BY t."notification_id", t."channel", t."rank"
	)
	INSERT INTO "webhook_completion_checks" ("notification_id")
	SELECT DISTINCT c."notification_id" FROM "changed" c
	JOIN "notifications" n ON n."id" = c."notification_id"
	WHERE c."status" IS DISTINCT FROM c."old_status"
		AND c."status" IN ('delivered', 'bounced', 'failed', 'expired', 'suppressed')
		AND ("webhook_wanted"(n."client_id", 'notification.completed')
			OR ("tallied" AND EXISTS (SELECT 1 FROM "broadcast_recipients" r
				JOIN "webhook_broadcast_tallies" t ON t."broadcast_id" = r."broadcast_id"
				WHERE r."notification_id" = c."notification_id" AND t."completed_at" IS NULL)))
	ON CONFLICT DO NOTHING;
	RETURN NULL;
END $$;--> statement-breakpoint
-- A broadcast accepted while an endpoint of its client wants broadcast.completed is tallied.
CREATE FUNCTION "webhook_broadcast_accepted"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NOT "webhook_any_enabled"() THEN RETURN NULL; END IF;
	INSERT INTO "webhook_broadcast_tallies" ("broadcast_id", "client_id")
	SELECT b."id", b."client_id" FROM "accepted_broadcasts" b
	WHERE "webhook_wanted"(b."client_id", 'broadcast.completed')
	ON CONFLICT DO NOTHING;
	RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER "webhook_broadcast_accepted" AFTER INSERT ON "broadcasts"
	REFERENCING NEW TABLE AS "accepted_broadcasts" FOR EACH STATEMENT EXECUTE FUNCTION "webhook_broadcast_accepted"();--> statement-breakpoint
-- A tallied broadcast that finishes expanding (or is cancelled) is looked at again by the
-- dispatcher: its recipients may all have ended already.
CREATE FUNCTION "webhook_broadcast_finished"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE "webhook_broadcast_tallies" t SET "check_due" = true
	FROM "updated_broadcasts" b JOIN "previous_broadcasts" o USING ("id")
	WHERE t."broadcast_id" = b."id" AND t."completed_at" IS NULL
		AND b."status" IN ('expanded', 'cancelled') AND o."status" NOT IN ('expanded', 'cancelled');
	RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER "webhook_broadcast_finished" AFTER UPDATE ON "broadcasts"
	REFERENCING OLD TABLE AS "previous_broadcasts" NEW TABLE AS "updated_broadcasts" FOR EACH STATEMENT EXECUTE FUNCTION "webhook_broadcast_finished"();
