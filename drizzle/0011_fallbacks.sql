CREATE TABLE "notification_fallbacks" (
	"notification_id" text PRIMARY KEY NOT NULL,
	"steps" jsonb NOT NULL,
	"next_step" integer DEFAULT 0 NOT NULL,
	"watching" text NOT NULL,
	"confirm_by" timestamp with time zone,
	"taken" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"done_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "notification_fallbacks" ADD CONSTRAINT "notification_fallbacks_notification_id_notifications_id_fk" FOREIGN KEY ("notification_id") REFERENCES "public"."notifications"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "notification_fallbacks_open_idx" ON "notification_fallbacks" USING btree ("created_at") WHERE "notification_fallbacks"."done_at" is null;--> statement-breakpoint
CREATE INDEX "provider_receipts_provider_id_idx" ON "provider_receipts" USING btree ("provider","provider_id");