ALTER TABLE "delivery_attempts" ADD COLUMN "provider" text;--> statement-breakpoint
ALTER TABLE "notifications" ADD COLUMN "deliver_by" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "template_versions" ADD COLUMN "ttl_seconds" integer;