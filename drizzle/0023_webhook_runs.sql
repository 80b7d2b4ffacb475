-- A delivery's runs: each replay starts a new run of attempts, numbered from 1 again, and the
-- attempts' key holds the run, so a replay's posts are recorded beside the attempts before it.
-- The columns come first with a constant default (no table rewrite: existing rows read 0), then
-- the key is rebuilt from a unique index under the constraint's name and IF NOT EXISTS, so that on
-- a large webhook_attempts the column and index can be made first (CREATE UNIQUE INDEX
-- CONCURRENTLY, see docs/operations.md) and this migration only swaps the key.
ALTER TABLE "webhook_deliveries" ADD COLUMN IF NOT EXISTS "run" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "webhook_attempts" ADD COLUMN IF NOT EXISTS "run" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX IF NOT EXISTS "webhook_attempts_endpoint_id_event_id_run_attempt_pk" ON "webhook_attempts" USING btree ("endpoint_id","event_id","run","attempt");--> statement-breakpoint
ALTER TABLE "webhook_attempts" DROP CONSTRAINT "webhook_attempts_endpoint_id_event_id_attempt_pk";--> statement-breakpoint
ALTER TABLE "webhook_attempts" ADD CONSTRAINT "webhook_attempts_endpoint_id_event_id_run_attempt_pk" PRIMARY KEY USING INDEX "webhook_attempts_endpoint_id_event_id_run_attempt_pk";
