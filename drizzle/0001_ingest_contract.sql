CREATE TABLE "idempotency_keys" (
	"client_id" text NOT NULL,
	"key" text NOT NULL,
	"request_hash" text NOT NULL,
	"notification_id" text NOT NULL,
	"state" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "idempotency_keys_client_id_key_pk" PRIMARY KEY("client_id","key")
);
--> statement-breakpoint
CREATE TABLE "promotional_daily_counts" (
	"user_id" text NOT NULL,
	"day" date NOT NULL,
	"count" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "promotional_daily_counts_user_id_day_pk" PRIMARY KEY("user_id","day")
);
--> statement-breakpoint
DROP INDEX "notifications_client_dedup_idx";--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "rate_limit_burst" integer;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "rate_limit_per_second" integer;--> statement-breakpoint
ALTER TABLE "notifications" ADD COLUMN "template_version" integer;--> statement-breakpoint
CREATE INDEX "idempotency_keys_created_idx" ON "idempotency_keys" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "notifications_client_dedup_idx" ON "notifications" USING btree ("client_id","dedup_key");