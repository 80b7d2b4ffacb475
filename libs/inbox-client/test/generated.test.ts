import { readFileSync } from "node:fs";
import t from "tap";
import { GENERATED_FILE, generate, inboxDocument, ingestDocument } from "../scripts/generate.js";

// The client's types are generated from the ingest app's OpenAPI document, never written by
// hand: the checked-in file must be exactly what the generator makes of the document the app
// builds now, so a changed inbox route fails here until `npm run generate -w @notify/inbox-client`.

const document = ingestDocument();

t.test("src/generated/openapi.ts is what the ingest app's document generates", async (t) => {
  const fresh = await generate(document);
  const checkedIn = readFileSync(GENERATED_FILE, "utf8");
  t.ok(
    fresh === checkedIn,
    "src/generated/openapi.ts differs from the ingest app's OpenAPI document: run `npm run generate -w @notify/inbox-client`",
  );
});

t.test("it holds every inbox route the client calls, and only the inbox routes", async (t) => {
  const paths = Object.keys(inboxDocument(document).paths ?? {}).sort();
  t.same(paths, [
    "/api/v1/inbox",
    "/api/v1/inbox/counts",
    "/api/v1/inbox/mark-all",
    "/api/v1/inbox/preferences",
    "/api/v1/inbox/stream",
    "/api/v1/inbox/{itemId}",
  ]);
  t.ok(Object.keys(document.paths ?? {}).length > paths.length, "the app's document has more");
});

t.test("a changed contract gives a different file", async (t) => {
  const changed = structuredClone(document);
  const list = changed.paths?.["/api/v1/inbox"] as { get: { summary?: string } };
  list.get.summary = "changed";
  t.not(await generate(changed), await generate(document));
});
