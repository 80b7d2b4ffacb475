CREATE TABLE "broadcast_progress" (
	"broadcast_id" text PRIMARY KEY NOT NULL,
	"suppressed" bigint NOT NULL,
	"delivered" bigint NOT NULL,
	"failed" bigint NOT NULL,
	"counted_at" timestamp with time zone NOT NULL,
	"count_ms" integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE "broadcast_progress" ADD CONSTRAINT "broadcast_progress_broadcast_id_broadcasts_id_fk" FOREIGN KEY ("broadcast_id") REFERENCES "public"."broadcasts"("id") ON DELETE cascade ON UPDATE no action;