-- A completion check asked for while another channel's check of the same notification waits
-- was passed over (ON CONFLICT DO NOTHING): the dispatcher could take the earlier check before
-- this transaction committed, see this channel still open, and drop it, so the notification's
-- notification.completed was never written. The function is 0024's with the check updated
-- instead (the row stays locked until the commit); its triggers stay as they are.
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
		JOIN "notifications" n ON n."id" = t."notification_id"
		WHERE "webhook_wanted"(n."client_id", t."type")
		ORDER BY t."notification_id", t."channel", t."rank"
	)
	INSERT INTO "webhook_completion_checks" ("notification_id")
	SELECT DISTINCT c."notification_id" FROM "changed" c
	JOIN "notifications" n ON n."id" = c."notification_id"
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
