CREATE TABLE "sweep_positions" (
	"name" text PRIMARY KEY NOT NULL,
	"position" text NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "notification_channels_waiting_idx" ON "notification_channels" USING btree ("updated_at") WHERE "notification_channels"."status" in ('pending', 'deferred', 'retrying', 'parked') or ("notification_channels"."channel" = 'in_app' and "notification_channels"."status" = 'unsettled');