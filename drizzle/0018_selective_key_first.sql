-- The new indexes are built before the old ones go, under their own names and IF NOT EXISTS, so
-- that on a large database they can be built first with CREATE INDEX CONCURRENTLY (see
-- docs/operations.md) and this migration only swaps them in.
CREATE INDEX IF NOT EXISTS "notification_channels_provider_id_idx" ON "notification_channels" USING btree ("provider_id","provider");--> statement-breakpoint
DROP INDEX IF EXISTS "notification_channels_provider_idx";--> statement-breakpoint
CREATE INDEX IF NOT EXISTS "provider_receipts_waiting_idx" ON "provider_receipts" USING btree ("received_at","event_id") WHERE "provider_receipts"."applied_at" is null;--> statement-breakpoint
DROP INDEX IF EXISTS "provider_receipts_unapplied_idx";--> statement-breakpoint
CREATE INDEX IF NOT EXISTS "provider_receipts_message_idx" ON "provider_receipts" USING btree ("provider_id","provider");--> statement-breakpoint
DROP INDEX IF EXISTS "provider_receipts_provider_id_idx";--> statement-breakpoint
CREATE UNIQUE INDEX IF NOT EXISTS "provider_receipts_event_id_provider_pk" ON "provider_receipts" USING btree ("event_id","provider");--> statement-breakpoint
ALTER TABLE "provider_receipts" DROP CONSTRAINT "provider_receipts_provider_event_id_pk";--> statement-breakpoint
ALTER TABLE "provider_receipts" ADD CONSTRAINT "provider_receipts_event_id_provider_pk" PRIMARY KEY USING INDEX "provider_receipts_event_id_provider_pk";
