DROP INDEX "inbox_items_user_idx";--> statement-breakpoint
ALTER TABLE "inbox_items" ADD COLUMN "client_id" text;--> statement-breakpoint
ALTER TABLE "inbox_tokens" ADD COLUMN "key_id" text;--> statement-breakpoint
CREATE INDEX "inbox_items_user_client_idx" ON "inbox_items" USING btree ("user_id","client_id","id");--> statement-breakpoint
-- Items stored before the client was recorded take it from their notification, where it still exists.
UPDATE "inbox_items" i SET "client_id" = n."client_id" FROM "notifications" n WHERE n."id" = i."notification_id" AND i."client_id" IS NULL;
