CREATE TABLE "audience_members" (
	"audience_id" text NOT NULL,
	"user_id" text NOT NULL,
	"added_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "audience_members_audience_id_user_id_pk" PRIMARY KEY("audience_id","user_id")
);
--> statement-breakpoint
CREATE TABLE "audiences" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "broadcast_recipients" (
	"broadcast_id" text NOT NULL,
	"user_id" text NOT NULL,
	"notification_id" text NOT NULL,
	CONSTRAINT "broadcast_recipients_broadcast_id_user_id_pk" PRIMARY KEY("broadcast_id","user_id")
);
--> statement-breakpoint
CREATE TABLE "broadcasts" (
	"id" text PRIMARY KEY NOT NULL,
	"client_id" text NOT NULL,
	"dedup_key" text NOT NULL,
	"request_hash" text NOT NULL,
	"audience_id" text NOT NULL,
	"category" text NOT NULL,
	"template_id" text NOT NULL,
	"template_version" integer,
	"requested_channels" text[],
	"data" jsonb NOT NULL,
	"status" text NOT NULL,
	"total" bigint NOT NULL,
	"expanded" bigint DEFAULT 0 NOT NULL,
	"cursor" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "audience_members" ADD CONSTRAINT "audience_members_audience_id_audiences_id_fk" FOREIGN KEY ("audience_id") REFERENCES "public"."audiences"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "broadcast_recipients" ADD CONSTRAINT "broadcast_recipients_broadcast_id_broadcasts_id_fk" FOREIGN KEY ("broadcast_id") REFERENCES "public"."broadcasts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "broadcasts" ADD CONSTRAINT "broadcasts_audience_id_audiences_id_fk" FOREIGN KEY ("audience_id") REFERENCES "public"."audiences"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "broadcast_recipients_notification_idx" ON "broadcast_recipients" USING btree ("notification_id");--> statement-breakpoint
CREATE UNIQUE INDEX "broadcasts_client_dedup_idx" ON "broadcasts" USING btree ("client_id","dedup_key");--> statement-breakpoint
CREATE INDEX "broadcasts_expanding_idx" ON "broadcasts" USING btree ("created_at") WHERE "broadcasts"."status" = 'expanding';