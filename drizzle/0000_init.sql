CREATE TABLE "api_keys" (
	"id" text PRIMARY KEY NOT NULL,
	"client_id" text NOT NULL,
	"name" text NOT NULL,
	"prefix" text NOT NULL,
	"key_hash" text NOT NULL,
	"scopes" text[] NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"revoked_at" timestamp with time zone,
	"last_used_at" timestamp with time zone,
	CONSTRAINT "api_keys_key_hash_unique" UNIQUE("key_hash")
);
--> statement-breakpoint
CREATE TABLE "delivery_attempts" (
	"notification_id" text NOT NULL,
	"channel" text NOT NULL,
	"attempt" integer NOT NULL,
	"outcome" text NOT NULL,
	"provider_id" text,
	"error" text,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "delivery_attempts_notification_id_channel_attempt_pk" PRIMARY KEY("notification_id","channel","attempt")
);
--> statement-breakpoint
CREATE TABLE "notification_channels" (
	"notification_id" text NOT NULL,
	"channel" text NOT NULL,
	"status" text NOT NULL,
	"provider" text,
	"provider_id" text,
	"reason" text,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "notification_channels_notification_id_channel_pk" PRIMARY KEY("notification_id","channel")
);
--> statement-breakpoint
CREATE TABLE "notifications" (
	"id" text PRIMARY KEY NOT NULL,
	"client_id" text NOT NULL,
	"user_id" text NOT NULL,
	"category" text NOT NULL,
	"template_id" text NOT NULL,
	"priority" text NOT NULL,
	"requested_channels" text[],
	"data" jsonb NOT NULL,
	"dedup_key" text NOT NULL,
	"request_hash" text NOT NULL,
	"partition" smallint NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"published_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "provider_receipts" (
	"provider" text NOT NULL,
	"event_id" text NOT NULL,
	"provider_id" text NOT NULL,
	"status" text NOT NULL,
	"reason" text,
	"payload" jsonb NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	"applied_at" timestamp with time zone,
	CONSTRAINT "provider_receipts_provider_event_id_pk" PRIMARY KEY("provider","event_id")
);
--> statement-breakpoint
CREATE TABLE "template_variants" (
	"template_id" text NOT NULL,
	"version" integer NOT NULL,
	"channel" text NOT NULL,
	"locale" text NOT NULL,
	"subject" text,
	"body_template" text NOT NULL,
	CONSTRAINT "template_variants_template_id_version_channel_locale_pk" PRIMARY KEY("template_id","version","channel","locale")
);
--> statement-breakpoint
CREATE TABLE "template_versions" (
	"template_id" text NOT NULL,
	"version" integer NOT NULL,
	"params" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "template_versions_template_id_version_pk" PRIMARY KEY("template_id","version")
);
--> statement-breakpoint
CREATE TABLE "templates" (
	"id" text PRIMARY KEY NOT NULL,
	"default_locale" text DEFAULT 'en' NOT NULL,
	"latest_version" integer NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "user_contacts" (
	"user_id" text PRIMARY KEY NOT NULL,
	"email" text,
	"phone" text,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "user_preferences" (
	"user_id" text PRIMARY KEY NOT NULL,
	"channel_optout" text[] DEFAULT '{}' NOT NULL,
	"category_optout" text[] DEFAULT '{}' NOT NULL,
	"quiet_hours" jsonb,
	"rate_cap_per_day" integer,
	"device_tokens" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"locale" text,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "delivery_attempts" ADD CONSTRAINT "delivery_attempts_notification_id_notifications_id_fk" FOREIGN KEY ("notification_id") REFERENCES "public"."notifications"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "notification_channels" ADD CONSTRAINT "notification_channels_notification_id_notifications_id_fk" FOREIGN KEY ("notification_id") REFERENCES "public"."notifications"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "template_versions" ADD CONSTRAINT "template_versions_template_id_templates_id_fk" FOREIGN KEY ("template_id") REFERENCES "public"."templates"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "api_keys_client_idx" ON "api_keys" USING btree ("client_id");--> statement-breakpoint
CREATE INDEX "notification_channels_provider_idx" ON "notification_channels" USING btree ("provider","provider_id");--> statement-breakpoint
CREATE INDEX "notifications_user_created_idx" ON "notifications" USING btree ("user_id","created_at" DESC NULLS LAST,"id");--> statement-breakpoint
CREATE UNIQUE INDEX "notifications_client_dedup_idx" ON "notifications" USING btree ("client_id","dedup_key");--> statement-breakpoint
CREATE INDEX "notifications_unpublished_idx" ON "notifications" USING btree ("created_at") WHERE "notifications"."published_at" is null;--> statement-breakpoint
CREATE INDEX "provider_receipts_unapplied_idx" ON "provider_receipts" USING btree ("provider","provider_id") WHERE "provider_receipts"."applied_at" is null;