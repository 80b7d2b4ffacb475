import { AppError, suppressionAddress } from "@notify/core";
import { type Database, liftCarrierOptOut } from "@notify/db";
import { type AppEnv, noteAccess, type UnverifiedReads } from "@notify/http";
import type { Hono } from "hono";
import type { ReceiptMetrics } from "./metrics.js";
import { verifiedPlivoForm } from "./plivo.js";
import { addReported } from "./suppressions.js";
import { storable } from "./text.js";

export interface PlivoInboundDeps {
  database: Database;
  /** The auth token Plivo signs its callbacks with. */
  authToken: string;
  publicBaseUrl?: string;
  metrics: ReceiptMetrics;
  unverified: UnverifiedReads;
  /** Largest post (413 beyond): one message of up to 1 600 characters and a dozen short fields. */
  maxBodyBytes: number;
  /** The answers to an opt-out and to an opt-in; empty or unset: none. */
  replies?: { optOut?: string; optIn?: string };
}

/** The keywords carriers (CTIA, and Plivo's own handling) treat as an opt-out, and as an opt-in. */
export const OPT_OUT_KEYWORDS = new Set([
  "STOP",
  "STOPALL",
  "UNSUBSCRIBE",
  "CANCEL",
  "END",
  "QUIT",
  "OPTOUT",
  "REVOKE",
]);
export const OPT_IN_KEYWORDS = new Set(["START", "UNSTOP", "YES", "OPTIN"]);

/**
 * What a message asks: the whole text, trimmed, is a keyword (in any case). ASCII letters only,
 * so no Unicode case mapping makes another word one ("ſtop" upper-cases to "STOP").
 */
export function keywordOf(text: string): { kind: "opt_out" | "opt_in"; keyword: string } | null {
  const word = text.trim();
  if (!/^[A-Za-z]{1,16}$/.test(word)) return null;
  const keyword = word.toUpperCase();
  if (OPT_OUT_KEYWORDS.has(keyword)) return { kind: "opt_out", keyword };
  if (OPT_IN_KEYWORDS.has(keyword)) return { kind: "opt_in", keyword };
  return null;
}

/**
 * Whether XML 1.0 can carry a character at all (escaping does not help with the others): tab,
 * line feed, carriage return and everything from U+0020 but unpaired surrogates, U+FFFE, U+FFFF.
 * `for ... of` yields a paired surrogate as one code point and an unpaired one as itself.
 */
export const xmlCharacter = (ch: string): boolean => {
  const code = ch.codePointAt(0) ?? 0;
  if (code < 0x20) return code === 0x09 || code === 0x0a || code === 0x0d;
  return !(code >= 0xd800 && code <= 0xdfff) && code !== 0xfffe && code !== 0xffff;
};

/** Text and attribute values for Plivo XML: escaped, and without what XML cannot hold. */
export const xmlEscape = (value: string): string =>
  [...value]
    .filter(xmlCharacter)
    .join("")
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&apos;");

/** Plivo XML answering a message with `text`, from the number it was sent to, or an empty answer. */
export function plivoReply(reply: { src: string; dst: string; text: string } | null): string {
  if (reply === null) return '<?xml version="1.0" encoding="UTF-8"?>\n<Response/>';
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Response><Message src="${xmlEscape(reply.src)}" dst="${xmlEscape(reply.dst)}">${xmlEscape(reply.text)}</Message></Response>`;
}

/**
 * Messages sent to our numbers (the Plivo application's message URL): signed form posts (From,
 * To, Text, MessageUUID), verified as delivery reports are (V3 only). An opt-out keyword puts the
 * sender's number on the suppression list for every client at once (carrier_opt_out); an opt-in
 * keyword lifts that entry, and only that one (a hard bounce or an operator's entry stays). The
 * answer is Plivo XML: the configured confirmation as a reply, or an empty <Response/>. Any other
 * message changes nothing. Nothing of a message is stored but the entry it adds.
 *
 * Replay: like a report, a captured message can be posted again with its V3 signature. A STOP
 * replayed adds nothing new; a START replayed after a later STOP would lift that STOP.
 */
export function mountPlivoInbound(app: Hono<AppEnv>, deps: PlivoInboundDeps): void {
  app.post("/webhooks/plivo/inbound", deps.unverified.guard(deps.maxBodyBytes), async (c) => {
    const params = await verifiedPlivoForm(c, deps);
    const one = (name: string) => params[name]?.[0];
    const from = one("From");
    const to = one("To") ?? "";
    const text = one("Text") ?? "";
    const messageUuid = one("MessageUUID");
    const usable = (value: string | undefined) => value !== undefined && value.length <= 256 && storable(value);
    if (!from || !usable(from) || !usable(to) || !messageUuid || !usable(messageUuid)) {
      deps.metrics.rejected.inc({ provider: "plivo", reason: "invalid_event" });
      const problem = (value: string | undefined) =>
        value ? "must be at most 256 characters, without U+0000" : "is required";
      throw new AppError("validation_failed", "an inbound message needs From and MessageUUID", {
        fields: [
          ...(from && usable(from) ? [] : [{ field: "From", message: problem(from) }]),
          ...(usable(to) ? [] : [{ field: "To", message: problem(to) }]),
          ...(messageUuid && usable(messageUuid) ? [] : [{ field: "MessageUUID", message: problem(messageUuid) }]),
        ],
      });
    }
    const asked = keywordOf(text);
    const address = suppressionAddress("sms", from);
    let suppressed = 0;
    let lifted = false;
    if (asked !== null && address !== null) {
      if (asked.kind === "opt_out") {
        const entry = {
          channel: "sms" as const,
          address,
          client_id: "",
          reason: "carrier_opt_out" as const,
          source: { provider: "plivo", event: asked.keyword.toLowerCase(), event_id: messageUuid },
        };
        suppressed = await addReported(deps.database, [entry], deps.metrics, "plivo");
      } else {
        lifted = await liftCarrierOptOut(deps.database, address);
      }
    }
    const replyText =
      asked === null || address === null ? "" : asked.kind === "opt_out" ? deps.replies?.optOut : deps.replies?.optIn;
    // Neither the numbers nor the text in the access line: they are the sender's.
    noteAccess(c, { provider: "plivo", message_uuid: messageUuid, keyword: asked?.kind ?? null, suppressed, lifted });
    return c.body(plivoReply(replyText && to ? { src: to, dst: from, text: replyText } : null), 200, {
      "content-type": "application/xml; charset=utf-8",
    });
  });
}
