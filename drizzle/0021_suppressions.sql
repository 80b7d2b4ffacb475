CREATE TABLE "suppressions" (
	"channel" text NOT NULL,
	"address" text NOT NULL,
	"client_id" text DEFAULT '' NOT NULL,
	"reason" text NOT NULL,
	"source" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "suppressions_pkey" PRIMARY KEY("channel","address","client_id"),
	CONSTRAINT "suppressions_channel_check" CHECK ("suppressions"."channel" in ('email', 'sms')),
	CONSTRAINT "suppressions_reason_check" CHECK ("suppressions"."reason" in ('hard_bounce', 'spam_complaint', 'unsubscribe', 'carrier_opt_out', 'manual'))
);
--> statement-breakpoint
CREATE INDEX "suppressions_client_created_idx" ON "suppressions" USING btree ("client_id","created_at","channel","address");--> statement-breakpoint
CREATE INDEX "suppressions_created_idx" ON "suppressions" USING btree ("created_at","channel","address","client_id");