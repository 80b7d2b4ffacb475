DROP INDEX "notification_channels_provider_idx";--> statement-breakpoint
DROP INDEX "provider_receipts_unapplied_idx";--> statement-breakpoint
DROP INDEX "provider_receipts_provider_id_idx";--> statement-breakpoint
ALTER TABLE "provider_receipts" DROP CONSTRAINT "provider_receipts_provider_event_id_pk";--> statement-breakpoint
ALTER TABLE "provider_receipts" ADD CONSTRAINT "provider_receipts_event_id_provider_pk" PRIMARY KEY("event_id","provider");--> statement-breakpoint
CREATE INDEX "notification_channels_provider_idx" ON "notification_channels" USING btree ("provider_id","provider");--> statement-breakpoint
CREATE INDEX "provider_receipts_unapplied_idx" ON "provider_receipts" USING btree ("received_at","event_id") WHERE "provider_receipts"."applied_at" is null;--> statement-breakpoint
CREATE INDEX "provider_receipts_provider_id_idx" ON "provider_receipts" USING btree ("provider_id","provider");