import { validate } from "@notify/http";
import type { Hono } from "hono";
import { type AuthEnv, requireScope } from "../auth/middleware.js";
import { listDeadLetters } from "../dead-letters/list.js";
import { DeadLetterPage, ListDeadLettersQuery } from "../dead-letters/schemas.js";
import type { IngestDeps } from "../deps.js";
import { contract } from "./contract.js";

/** Dead letters by page: an operator's list, with a total. */
export function mountDeadLetters(v1: Hono<AuthEnv>, deps: Pick<IngestDeps, "bus">): void {
  v1.get(
    "/dead-letters",
    contract({
      summary: "List dead letters",
      description:
        "Newest first from the dead-letter stream (kept 30 days), offset pagination: page_size 50 by default, clamped to 200; total_count counts the letters matching the filters. Inspect and replay them with `notify dlq`.",
      tag: "Dead letters",
      scope: "admin",
      query: ListDeadLettersQuery,
      responses: { 200: { description: "One page", schema: DeadLetterPage } },
      problems: ["validation_failed"],
    }),
    requireScope("admin"),
    async (c) => c.json(await listDeadLetters(deps.bus, validate(ListDeadLettersQuery, c.req.query()))),
  );
}
