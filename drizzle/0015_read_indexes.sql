ALTER TABLE "broadcast_progress" DROP CONSTRAINT "broadcast_progress_broadcast_id_broadcasts_id_fk";
--> statement-breakpoint
ALTER TABLE "audiences" ADD COLUMN "member_count" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX IF NOT EXISTS "notifications_created_idx" ON "notifications" USING btree ("created_at");--> statement-breakpoint
CREATE FUNCTION "audience_members_counted"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	-- Each branch reads only its own trigger's transition table.
	IF TG_OP = 'INSERT' THEN
		UPDATE "audiences" a SET "member_count" = a."member_count" + n."changed"
		FROM (SELECT "audience_id", count(*) AS "changed" FROM "added_members" GROUP BY "audience_id") n
		WHERE a."id" = n."audience_id";
	ELSE
		UPDATE "audiences" a SET "member_count" = a."member_count" - n."changed"
		FROM (SELECT "audience_id", count(*) AS "changed" FROM "removed_members" GROUP BY "audience_id") n
		WHERE a."id" = n."audience_id";
	END IF;
	RETURN NULL;
END $$;--> statement-breakpoint
CREATE FUNCTION "audience_members_emptied"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE "audiences" SET "member_count" = 0 WHERE "member_count" <> 0;
	RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER "audience_members_count_added" AFTER INSERT ON "audience_members"
	REFERENCING NEW TABLE AS "added_members" FOR EACH STATEMENT EXECUTE FUNCTION "audience_members_counted"();--> statement-breakpoint
CREATE TRIGGER "audience_members_count_removed" AFTER DELETE ON "audience_members"
	REFERENCING OLD TABLE AS "removed_members" FOR EACH STATEMENT EXECUTE FUNCTION "audience_members_counted"();--> statement-breakpoint
CREATE TRIGGER "audience_members_count_emptied" AFTER TRUNCATE ON "audience_members"
	FOR EACH STATEMENT EXECUTE FUNCTION "audience_members_emptied"();--> statement-breakpoint
UPDATE "audiences" a SET "member_count" = (SELECT count(*) FROM "audience_members" m WHERE m."audience_id" = a."id");
