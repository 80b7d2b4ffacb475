CREATE TABLE "webhook_attempts" (
	"endpoint_id" text NOT NULL,
	"event_id" bigint NOT NULL,
	"attempt" integer NOT NULL,
	"status_code" integer,
	"latency_ms" integer NOT NULL,
	"error" text,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "webhook_attempts_endpoint_id_event_id_attempt_pk" PRIMARY KEY("endpoint_id","event_id","attempt")
);
--> statement-breakpoint
CREATE TABLE "webhook_completion_checks" (
	"notification_id" text PRIMARY KEY NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhook_deliveries" (
	"endpoint_id" text NOT NULL,
	"event_id" bigint NOT NULL,
	"status" text DEFAULT 'waiting' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone,
	"last_error" text,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "webhook_deliveries_endpoint_id_event_id_pk" PRIMARY KEY("endpoint_id","event_id")
);
--> statement-breakpoint
CREATE TABLE "webhook_endpoints" (
	"id" text PRIMARY KEY NOT NULL,
	"client_id" text NOT NULL,
	"url" text NOT NULL,
	"event_types" text[],
	"description" text,
	"status" text DEFAULT 'enabled' NOT NULL,
	"disabled_reason" text,
	"disabled_at" timestamp with time zone,
	"secret" text NOT NULL,
	"previous_secret" text,
	"previous_secret_expires_at" timestamp with time zone,
	"failing_since" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhook_events" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "webhook_events_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"client_id" text NOT NULL,
	"type" text NOT NULL,
	"notification_id" text,
	"data" jsonb NOT NULL,
	"occurred_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "webhook_attempts" ADD CONSTRAINT "webhook_attempts_endpoint_id_webhook_endpoints_id_fk" FOREIGN KEY ("endpoint_id") REFERENCES "public"."webhook_endpoints"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_endpoint_id_webhook_endpoints_id_fk" FOREIGN KEY ("endpoint_id") REFERENCES "public"."webhook_endpoints"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "webhook_attempts_endpoint_idx" ON "webhook_attempts" USING btree ("endpoint_id","at");--> statement-breakpoint
CREATE INDEX "webhook_deliveries_due_idx" ON "webhook_deliveries" USING btree ("next_attempt_at") WHERE "webhook_deliveries"."status" in ('waiting', 'queued');--> statement-breakpoint
CREATE INDEX "webhook_deliveries_dead_idx" ON "webhook_deliveries" USING btree ("endpoint_id","updated_at") WHERE "webhook_deliveries"."status" = 'dead';--> statement-breakpoint
CREATE INDEX "webhook_endpoints_client_idx" ON "webhook_endpoints" USING btree ("client_id","id");--> statement-breakpoint
CREATE INDEX "webhook_events_client_idx" ON "webhook_events" USING btree ("client_id","occurred_at","id");--> statement-breakpoint
CREATE INDEX "webhook_events_notification_idx" ON "webhook_events" USING btree ("notification_id");--> statement-breakpoint
CREATE UNIQUE INDEX "webhook_events_completed_idx" ON "webhook_events" USING btree ("notification_id") WHERE "webhook_events"."type" = 'notification.completed';--> statement-breakpoint
-- Outbound events are written by the triggers below, in the transaction of the change that
-- causes them, whatever statement or stage makes it; a client without an enabled endpoint that
-- wants an event's type costs each statement one look at webhook_endpoints and nothing more.
CREATE FUNCTION "webhook_wanted"("client" text, "event_type" text) RETURNS boolean LANGUAGE sql STABLE AS $$
	SELECT EXISTS (
		SELECT 1 FROM "webhook_endpoints" e
		WHERE e."client_id" = "client" AND e."status" = 'enabled'
			AND (e."event_types" IS NULL OR "event_type" = ANY (e."event_types")))
$$;--> statement-breakpoint
CREATE FUNCTION "webhook_any_enabled"() RETURNS boolean LANGUAGE sql STABLE AS $$
	SELECT EXISTS (SELECT 1 FROM "webhook_endpoints" WHERE "status" = 'enabled')
$$;--> statement-breakpoint
-- Each event is owed to every enabled endpoint of its client that wants its type (a ping and a
-- replay name their endpoint themselves).
CREATE FUNCTION "webhook_events_fan_out"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO "webhook_deliveries" ("endpoint_id", "event_id", "next_attempt_at")
	SELECT e."id", ev."id", ev."occurred_at"
	FROM "new_events" ev
	JOIN "webhook_endpoints" e ON e."client_id" = ev."client_id" AND e."status" = 'enabled'
		AND (e."event_types" IS NULL OR ev."type" = ANY (e."event_types"))
	WHERE ev."type" <> 'ping'
	ORDER BY ev."id";
	RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER "webhook_events_fan_out" AFTER INSERT ON "webhook_events"
	REFERENCING NEW TABLE AS "new_events" FOR EACH STATEMENT EXECUTE FUNCTION "webhook_events_fan_out"();--> statement-breakpoint
CREATE FUNCTION "webhook_notifications_accepted"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NOT "webhook_any_enabled"() THEN RETURN NULL; END IF;
	INSERT INTO "webhook_events" ("client_id", "type", "notification_id", "data")
	SELECT n."client_id", 'notification.accepted', n."id", jsonb_build_object(
		'notification_id', n."id", 'client_id', n."client_id", 'user_id', n."user_id",
		'category', n."category", 'template_id', n."template_id", 'priority', n."priority",
		'channels', to_jsonb(n."requested_channels"), 'deliver_by', n."deliver_by")
	FROM "accepted_notifications" n
	WHERE "webhook_wanted"(n."client_id", 'notification.accepted')
	ORDER BY n."created_at", n."id";
	RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER "webhook_notifications_accepted" AFTER INSERT ON "notifications"
	REFERENCING NEW TABLE AS "accepted_notifications" FOR EACH STATEMENT EXECUTE FUNCTION "webhook_notifications_accepted"();--> statement-breakpoint
-- A channel's outcome (inserted so, as a suppression at routing is, or moved to it) and a change
-- of its provider (email failing over) are events; a channel reaching an outcome also asks the
-- dispatcher to decide whether the whole notification has one (notification.completed), which
-- can only be told once the change is committed, as another channel may change at the same time.
CREATE FUNCTION "webhook_channel_events"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	"changes" jsonb;
BEGIN
	IF NOT "webhook_any_enabled"() THEN RETURN NULL; END IF;
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
		AND "webhook_wanted"(n."client_id", 'notification.completed')
	ON CONFLICT DO NOTHING;
	RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER "webhook_channels_inserted" AFTER INSERT ON "notification_channels"
	REFERENCING NEW TABLE AS "inserted_channels" FOR EACH STATEMENT EXECUTE FUNCTION "webhook_channel_events"();--> statement-breakpoint
CREATE TRIGGER "webhook_channels_updated" AFTER UPDATE ON "notification_channels"
	REFERENCING OLD TABLE AS "previous_channels" NEW TABLE AS "updated_channels" FOR EACH STATEMENT EXECUTE FUNCTION "webhook_channel_events"();--> statement-breakpoint
CREATE FUNCTION "webhook_fallback_taken"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NOT "webhook_any_enabled"() THEN RETURN NULL; END IF;
	INSERT INTO "webhook_events" ("client_id", "type", "notification_id", "data")
	SELECT n."client_id", 'fallback.taken', n."id", jsonb_build_object(
		'notification_id', n."id", 'client_id', n."client_id", 'user_id', n."user_id",
		'category', n."category", 'from', s."step"->>'from', 'to', s."step"->>'to',
		'because', s."step"->'because', 'step', f."next_step")
	FROM "updated_fallbacks" f
	JOIN "previous_fallbacks" o USING ("notification_id")
	JOIN "notifications" n ON n."id" = f."notification_id"
	CROSS JOIN LATERAL (SELECT f."taken"->(jsonb_array_length(f."taken") - 1) AS "step") s
	WHERE jsonb_array_length(f."taken") > jsonb_array_length(o."taken")
		AND "webhook_wanted"(n."client_id", 'fallback.taken')
	ORDER BY f."notification_id";
	RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER "webhook_fallback_taken" AFTER UPDATE ON "notification_fallbacks"
	REFERENCING OLD TABLE AS "previous_fallbacks" NEW TABLE AS "updated_fallbacks" FOR EACH STATEMENT EXECUTE FUNCTION "webhook_fallback_taken"();--> statement-breakpoint
CREATE FUNCTION "webhook_inbox_read"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NOT "webhook_any_enabled"() THEN RETURN NULL; END IF;
	INSERT INTO "webhook_events" ("client_id", "type", "notification_id", "data")
	SELECT i."client_id", 'inbox.read', i."notification_id", jsonb_build_object(
		'notification_id', i."notification_id", 'client_id', i."client_id", 'user_id', i."user_id",
		'category', i."category", 'channel', 'in_app', 'read_at', i."read_at")
	FROM "updated_items" i JOIN "previous_items" o USING ("id")
	WHERE o."read_at" IS NULL AND i."read_at" IS NOT NULL AND i."client_id" IS NOT NULL
		AND "webhook_wanted"(i."client_id", 'inbox.read')
	ORDER BY i."id";
	RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER "webhook_inbox_read" AFTER UPDATE ON "inbox_items"
	REFERENCING OLD TABLE AS "previous_items" NEW TABLE AS "updated_items" FOR EACH STATEMENT EXECUTE FUNCTION "webhook_inbox_read"();--> statement-breakpoint
CREATE FUNCTION "webhook_broadcast_expanded"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NOT "webhook_any_enabled"() THEN RETURN NULL; END IF;
	INSERT INTO "webhook_events" ("client_id", "type", "notification_id", "data")
	SELECT b."client_id", 'broadcast.expanded', NULL, jsonb_build_object(
		'broadcast_id', b."id", 'client_id', b."client_id", 'category', b."category",
		'template_id', b."template_id", 'total', b."total", 'expanded', b."expanded")
	FROM "updated_broadcasts" b JOIN "previous_broadcasts" o USING ("id")
	WHERE b."status" = 'expanded' AND o."status" <> 'expanded'
		AND "webhook_wanted"(b."client_id", 'broadcast.expanded')
	ORDER BY b."id";
	RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER "webhook_broadcast_expanded" AFTER UPDATE ON "broadcasts"
	REFERENCING OLD TABLE AS "previous_broadcasts" NEW TABLE AS "updated_broadcasts" FOR EACH STATEMENT EXECUTE FUNCTION "webhook_broadcast_expanded"();
