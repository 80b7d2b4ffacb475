CREATE TABLE "publish_outbox" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "publish_outbox_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"notification_ids" text[] NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
-- Rows left unpublished by the previous version move to the outbox, for the recovery sweep, in
-- batches of 500. The lock keeps a previous version's ingest or expander from committing a row
-- between this copy and the drop of published_at (stop them before migrating: README).
LOCK TABLE "notifications" IN SHARE ROW EXCLUSIVE MODE;--> statement-breakpoint
INSERT INTO "publish_outbox" ("notification_ids", "created_at")
	SELECT array_agg("id" ORDER BY "created_at", "id"), min("created_at")
	FROM (
		SELECT "id", "created_at", (row_number() OVER (ORDER BY "created_at", "id") - 1) / 500 AS "chunk"
		FROM "notifications" WHERE "published_at" IS NULL
	) AS "unpublished"
	GROUP BY "chunk";--> statement-breakpoint
DROP INDEX "notifications_client_dedup_idx";--> statement-breakpoint
DROP INDEX "notifications_unpublished_idx";--> statement-breakpoint
ALTER TABLE "idempotency_keys" DROP COLUMN "state";--> statement-breakpoint
ALTER TABLE "notifications" DROP COLUMN "published_at";