-- Channels routed before this migration keep null: their decision was not recorded (a default
-- given in ADD COLUMN would stamp them all with the migration's time).
ALTER TABLE "notification_channels" ADD COLUMN "routed_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "notification_channels" ALTER COLUMN "routed_at" SET DEFAULT now();--> statement-breakpoint
ALTER TABLE "notification_channels" ADD COLUMN "routed_status" text;--> statement-breakpoint
ALTER TABLE "notification_channels" ADD COLUMN "routed_reason" text;
