ALTER TABLE "notifications" ADD COLUMN "send_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "notifications" ADD COLUMN "send_at_local" jsonb;--> statement-breakpoint
ALTER TABLE "user_preferences" ADD COLUMN "time_zone" text;