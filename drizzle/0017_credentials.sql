CREATE TABLE "deployment_secrets" (
	"name" text PRIMARY KEY NOT NULL,
	"secret" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "inbox_token_revocations" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "inbox_token_revocations_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"client_id" text NOT NULL,
	"user_id" text NOT NULL,
	"token_id" text,
	"revoked_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "inbox_token_revocation_counts" (
	"client_id" text PRIMARY KEY NOT NULL,
	"held" integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE "contact_changes" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "contact_changes_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"user_id" text NOT NULL,
	"client_id" text NOT NULL,
	"key_id" text NOT NULL,
	"fields" text[] NOT NULL,
	"changed_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "minted_by" text;--> statement-breakpoint
CREATE INDEX "inbox_token_revocations_expires_idx" ON "inbox_token_revocations" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "contact_changes_user_idx" ON "contact_changes" USING btree ("user_id","id");--> statement-breakpoint
CREATE INDEX "api_keys_minted_by_idx" ON "api_keys" USING btree ("minted_by");--> statement-breakpoint
CREATE UNIQUE INDEX "inbox_token_revocations_token_idx" ON "inbox_token_revocations" USING btree ("client_id","user_id","token_id") WHERE "inbox_token_revocations"."token_id" is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "inbox_token_revocations_user_idx" ON "inbox_token_revocations" USING btree ("client_id","user_id") WHERE "inbox_token_revocations"."token_id" is null;