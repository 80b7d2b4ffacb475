CREATE TABLE "digest_items" (
	"notification_id" text PRIMARY KEY NOT NULL,
	"digest_id" text NOT NULL,
	"joined_at" timestamp with time zone DEFAULT now() NOT NULL,
	"canceled_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "digests" (
	"id" text PRIMARY KEY NOT NULL,
	"client_id" text NOT NULL,
	"user_id" text NOT NULL,
	"template_id" text NOT NULL,
	"key" text NOT NULL,
	"status" text NOT NULL,
	"max_items" integer NOT NULL,
	"item_count" integer DEFAULT 0 NOT NULL,
	"opened_at" timestamp with time zone DEFAULT now() NOT NULL,
	"closes_at" timestamp with time zone NOT NULL,
	"sent_at" timestamp with time zone,
	"notification_id" text
);
--> statement-breakpoint
CREATE TABLE "throttle_slots" (
	"client_id" text NOT NULL,
	"user_id" text NOT NULL,
	"key" text NOT NULL,
	"notification_id" text NOT NULL,
	"taken_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "throttle_slots_client_id_user_id_key_notification_id_pk" PRIMARY KEY("client_id","user_id","key","notification_id")
);
--> statement-breakpoint
ALTER TABLE "notifications" ADD COLUMN "digest" jsonb;--> statement-breakpoint
ALTER TABLE "notifications" ADD COLUMN "throttle" jsonb;--> statement-breakpoint
ALTER TABLE "notifications" ADD COLUMN "digest_of" text;--> statement-breakpoint
ALTER TABLE "digest_items" ADD CONSTRAINT "digest_items_notification_id_notifications_id_fk" FOREIGN KEY ("notification_id") REFERENCES "public"."notifications"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "digest_items_digest_idx" ON "digest_items" USING btree ("digest_id","notification_id");--> statement-breakpoint
CREATE UNIQUE INDEX "digests_open_key_idx" ON "digests" USING btree ("client_id","user_id","template_id","key") WHERE "digests"."status" = 'open';--> statement-breakpoint
CREATE INDEX "digests_due_idx" ON "digests" USING btree ("closes_at","id") WHERE "digests"."status" <> 'sent';--> statement-breakpoint
CREATE INDEX "digests_notification_idx" ON "digests" USING btree ("notification_id");--> statement-breakpoint
CREATE INDEX "throttle_slots_window_idx" ON "throttle_slots" USING btree ("client_id","user_id","key","taken_at");--> statement-breakpoint
CREATE INDEX "throttle_slots_taken_idx" ON "throttle_slots" USING btree ("taken_at");