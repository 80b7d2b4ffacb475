CREATE TABLE "deferred_notifications" (
	"notification_id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"due_at" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "template_versions" ADD COLUMN "default_locale" text;--> statement-breakpoint
ALTER TABLE "deferred_notifications" ADD CONSTRAINT "deferred_notifications_notification_id_notifications_id_fk" FOREIGN KEY ("notification_id") REFERENCES "public"."notifications"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "deferred_notifications_due_idx" ON "deferred_notifications" USING btree ("due_at","notification_id");