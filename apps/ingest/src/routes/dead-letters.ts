// The replay body's schema is libs/core's, which the processor (that runs the replay) validates again.
import { ReplayRequest, validate } from "@notify/core";
import { limitBody, readJson } from "@notify/http";
import type { Hono } from "hono";
import * as v from "valibot";
import type { AuthEnv } from "../auth/middleware.js";
import { listDeadLetters, showLetter } from "../dead-letters/list.js";
import { replayLetters } from "../dead-letters/replay.js";
import {
  DeadLetterDetail,
  DeadLetterPage,
  DeadLetterSeq,
  ListDeadLettersQuery,
  ReplayAnswer,
} from "../dead-letters/schemas.js";
import type { IngestDeps } from "../deps.js";
import { contract } from "./contract.js";

/**
 * Dead letters by page: an operator's list, with a total; one letter whole; the replay. A
 * processor does each (ingest asks it on NATS and answers what it answered).
 */
export function mountDeadLetters(
  v1: Hono<AuthEnv>,
  deps: Pick<IngestDeps, "bus" | "maxBodyBytes" | "replayTimeoutMs" | "deadLetterTimeoutMs">,
): void {
  v1.get(
    "/dead-letters",
    contract({
      summary: "List dead letters",
      description:
        "Newest first from the dead-letter stream (kept 30 days), offset pagination: page_size 50 by default, clamped to 200; total_count counts the letters matching the filters. Inspect and replay them with `notify dlq`.",
      tag: "Dead letters",
      scope: "operator",
      query: ListDeadLettersQuery,
      responses: { 200: { description: "One page", schema: DeadLetterPage } },
      problems: ["validation_failed"],
    }),
    async (c) => c.json(await listDeadLetters(deps, validate(ListDeadLettersQuery, c.req.query()))),
  );

  v1.post(
    "/dead-letters/replay",
    contract({
      summary: "Replay dead letters",
      description:
        "What `notify dlq replay` does. Select letters by `seqs`, by filters (channel, class, since, until, notification_id: as the list's), or every one with `all: true`; one of them is required. A channel dead-lettered more than once is replayed once, from its latest letter. Each is planned against the channel, the send guard and the user's preferences and address today: one already delivered or accepted, past its deliver-by, suppressed by today's preferences or unreachable is skipped (with why); one whose outcome is unknown only with `include_unsettled: true`. A replay resets the guard and the channel to pending and republishes the work item to the user's address now. `dry_run: true` changes and sends nothing: `previous_to` (the letter's address) beside `to` (the address now) is the diff. Named letters are read by sequence; a selection by filters or `all` takes at most 1000 letters and looks at at most 50,000 a call (up to `until`): `remaining` says how many were not looked at, and `from_seq: next_seq` goes on from there. The processor runs the replay (ingest asks it on NATS): none answering within 30 s is a 503 with Retry-After.",
      tag: "Dead letters",
      scope: "operator",
      body: ReplayRequest,
      responses: { 200: { description: "What was (or would be) replayed and skipped", schema: ReplayAnswer } },
      problems: ["validation_failed", "malformed_json", "payload_too_large", "unsupported_media_type"],
    }),
    limitBody(deps.maxBodyBytes),
    async (c) => {
      const request = validate(ReplayRequest, await readJson(c));
      const { keyId, clientId } = c.get("principal");
      const answer = await replayLetters(deps, request, { key_id: keyId, client_id: clientId });
      c.get("log").info(
        {
          dry_run: answer.dry_run,
          selected: answer.selected,
          replayed: answer.replayed,
          skipped: answer.skipped,
          remaining: answer.remaining,
        },
        answer.dry_run ? "dead letters replay planned" : "dead letters replayed",
      );
      return c.json(answer);
    },
  );

  v1.get(
    "/dead-letters/:seq",
    contract({
      summary: "Read a dead letter",
      description:
        "The letter in full (the original request, the rendered item and every attempt), its channel's status now (null once the notification is gone) and the channel's status history: what `notify dlq show` prints.",
      tag: "Dead letters",
      scope: "operator",
      responses: { 200: { description: "The letter", schema: DeadLetterDetail } },
      problems: ["validation_failed", "not_found"],
    }),
    async (c) => {
      const seq = validate(v.object({ seq: DeadLetterSeq }), { seq: c.req.param("seq") }).seq;
      return c.json(await showLetter(deps, seq));
    },
  );
}
