import * as v from "valibot";
import { makeStorable, storable } from "./text.js";

/**
 * A signed Event Webhook body, event by event. One unusable event must never cost the others:
 * SendGrid retries a whole post that was not answered 2xx for 24 h, so refusing a batch for one
 * event would hold back (and finally drop) every bounce posted with it. Each event is either
 * accepted (stored, possibly repaired) or rejected with a reason; the caller answers 200 and
 * reports both.
 */

export type RejectReason = "not_an_object" | "invalid_utf8" | "invalid_event";
export type RepairReason = "unstorable_text" | "unknown_fields" | "invalid_utf8";

export interface RejectedEvent {
  index: number;
  reason: RejectReason | "unstorable";
  detail: string;
}

export interface RepairedEvent {
  index: number;
  reason: RepairReason;
  /** The fields dropped or whose text was replaced (dot paths). */
  fields: string[];
}

export interface AcceptedEvent {
  index: number;
  eventId: string;
  /**
   * The send's id, or undefined: SendGrid leaves it out of an asynchronous bounce (one the
   * receiving server sent back after accepting the mail). Such an event names no send and is not
   * stored as a receipt; it still reports its address to the suppression list.
   */
  messageId: string | undefined;
  event: string;
  /** What is stored: known fields only, every string storable. */
  payload: Record<string, unknown>;
}

export interface ParsedBatch {
  accepted: AcceptedEvent[];
  rejected: RejectedEvent[];
  repaired: RepairedEvent[];
  size: number;
}

/** The body is not a JSON array of anything: the whole post is refused (400). */
export class MalformedBatch extends Error {
  constructor(
    readonly code: "malformed_json" | "validation_failed",
    message: string,
  ) {
    super(message);
  }
}

/**
 * Fields SendGrid documents for its events (delivery, engagement, account status), and the
 * custom args our provider sets (`notification_id`, `channel`: SendGrid posts them at the top
 * level). Anything else is dropped before storage, not refused: SendGrid adds fields now and
 * then, and refusing a bounce for a new field would lose it.
 */
const KNOWN_FIELDS = new Set([
  "email",
  "timestamp",
  "smtp-id",
  "event",
  "category",
  "sg_event_id",
  "sg_message_id",
  "sg_template_id",
  "sg_template_name",
  "sg_content_type",
  "sg_machine_open",
  "useragent",
  "ip",
  "url",
  "url_offset",
  "reason",
  "status",
  "response",
  "attempt",
  "type",
  "bounce_classification",
  "tls",
  "cert_err",
  "pool",
  "asm_group_id",
  "marketing_campaign_id",
  "marketing_campaign_name",
  "marketing_campaign_version",
  "marketing_campaign_split_id",
  "singlesend_id",
  "singlesend_name",
  "template_id",
  "template_version_id",
  "mc_stats",
  "phase_id",
  "variation_id",
  "send_at",
  "post_type",
  "newsletter",
  "notification_id",
  "channel",
]);

// Ids are primary-key and index entries: btree rows have a size limit (about 2.7 kB).
const id = v.pipe(
  v.string("must be a string"),
  v.minLength(1, "must not be empty"),
  v.maxLength(256, "must be at most 256 characters"),
  v.check(storable, "must not contain U+0000 or an unpaired surrogate"),
);
const optionalText = v.optional(v.string("must be a string"));

/** The fields this service reads, with their types; the other known fields are stored as sent. */
const SendgridEvent = v.object({
  event: v.pipe(id, v.maxLength(64, "must be at most 64 characters")),
  sg_event_id: id,
  sg_message_id: v.optional(id),
  timestamp: v.optional(v.number("must be a number")),
  email: optionalText,
  type: optionalText,
  status: optionalText,
  reason: optionalText,
  notification_id: v.optional(id),
  channel: v.optional(id),
});

// Deeper values are refused: a nested value that deep is no SendGrid event, and recursion over
// it (ours, Postgres' jsonb parser) must stay bounded.
const MAX_DEPTH = 16;

/** The value with every string (and key) storable, or undefined when nested deeper than MAX_DEPTH. */
function repair(value: unknown, path: string, depth: number, replaced: string[]): { value: unknown } | undefined {
  if (typeof value === "string") {
    if (storable(value)) return { value };
    replaced.push(path);
    return { value: makeStorable(value) };
  }
  if (value === null || typeof value !== "object") return { value };
  if (depth >= MAX_DEPTH) return undefined;
  if (Array.isArray(value)) {
    const items: unknown[] = [];
    for (let i = 0; i < value.length; i++) {
      const item = repair(value[i], `${path}.${i}`, depth + 1, replaced);
      if (item === undefined) return undefined;
      items.push(item.value);
    }
    return { value: items };
  }
  const entries: Array<[string, unknown]> = [];
  for (const [key, item] of Object.entries(value)) {
    const at = `${path}.${storable(key) ? key : makeStorable(key)}`;
    if (!storable(key)) replaced.push(at);
    const repaired = repair(item, at, depth + 1, replaced);
    if (repaired === undefined) return undefined;
    entries.push([makeStorable(key), repaired.value]);
  }
  return { value: Object.fromEntries(entries) };
}

/** Dot paths of the strings holding U+FFFD (where broken UTF-8 was decoded); payloads are bounded in depth. */
function replacementPaths(value: unknown, path: string): string[] {
  if (typeof value === "string") return value.includes("\ufffd") ? [path] : [];
  if (value === null || typeof value !== "object") return [];
  return Object.entries(value).flatMap(([key, item]) => replacementPaths(item, path ? `${path}.${key}` : key));
}

const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);

/**
 * The byte ranges of a JSON array's elements, from the raw bytes: JSON's structural characters
 * are ASCII and every byte of a multi-byte (or broken) UTF-8 sequence is >= 0x80, so a byte scan
 * finds the elements even when some of them are not valid UTF-8. Only called on a body that
 * parsed as an array.
 */
export function elementSpans(bytes: Uint8Array): Array<[number, number]> {
  const spans: Array<[number, number]> = [];
  let i = 0;
  while (i < bytes.length && WHITESPACE.has(bytes[i] as number)) i++;
  if (bytes[i] !== 0x5b) return spans;
  let depth = 0;
  let inString = false;
  let escaped = false;
  let start = -1;
  for (i += 1; i < bytes.length; i++) {
    const b = bytes[i] as number;
    if (inString) {
      if (escaped) escaped = false;
      else if (b === 0x5c) escaped = true;
      else if (b === 0x22) inString = false;
      continue;
    }
    if (b === 0x22) inString = true;
    if (b === 0x22 || b === 0x5b || b === 0x7b) {
      if (start < 0) start = i;
      if (b !== 0x22) depth += 1;
    } else if (b === 0x5d || b === 0x7d) {
      if (depth === 0) {
        if (start >= 0) spans.push([start, i]);
        return spans;
      }
      depth -= 1;
    } else if (b === 0x2c && depth === 0) {
      spans.push([start, i]);
      start = -1;
    } else if (start < 0 && !WHITESPACE.has(b)) {
      start = i;
    }
  }
  return spans;
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const lenientUtf8 = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });

const validUtf8 = (bytes: Uint8Array): boolean => {
  try {
    strictUtf8.decode(bytes);
    return true;
  } catch {
    return false;
  }
};

const clip = (text: string): string => (text.length > 200 ? `${text.slice(0, 200)}…` : text);

/**
 * Splits a verified Event Webhook body into accepted, repaired and rejected events. Rejected:
 * not an object, a missing or mistyped field this service reads (event, sg_event_id; and when
 * present sg_message_id, timestamp, email, type, status, reason, notification_id, channel), an
 * id that Postgres cannot store or index, nesting deeper than 16, an id broken by invalid UTF-8.
 * Repaired and stored: unknown fields (dropped), U+0000 or unpaired surrogates in other text
 * (replaced by U+FFFD), invalid UTF-8 in other text (decoded as U+FFFD).
 */
export function parseSendgridBatch(body: Uint8Array): ParsedBatch {
  const strict = validUtf8(body);
  let events: unknown;
  try {
    events = JSON.parse(lenientUtf8.decode(body));
  } catch {
    throw new MalformedBatch("malformed_json", "the request body is not valid JSON");
  }
  if (!Array.isArray(events)) throw new MalformedBatch("validation_failed", "an Event Webhook body is a JSON array");

  // Only a body with broken UTF-8 is scanned: which events' bytes are broken.
  const broken = new Set<number>();
  if (!strict) {
    const spans = elementSpans(body);
    for (let i = 0; i < events.length; i++) {
      const span = spans.length === events.length ? spans[i] : undefined;
      if (span === undefined || !validUtf8(body.subarray(span[0], span[1]))) broken.add(i);
    }
  }

  const batch: ParsedBatch = { accepted: [], rejected: [], repaired: [], size: events.length };
  events.forEach((item: unknown, index) => {
    if (item === null || typeof item !== "object" || Array.isArray(item)) {
      batch.rejected.push({ index, reason: "not_an_object", detail: "an event is a JSON object" });
      return;
    }
    const checked = v.safeParse(SendgridEvent, item, { abortEarly: false });
    if (!checked.success) {
      const detail = checked.issues.map((issue) => `${v.getDotPath(issue) ?? "(event)"}: ${issue.message}`).join("; ");
      batch.rejected.push({ index, reason: "invalid_event", detail: clip(detail) });
      return;
    }
    const { event, sg_event_id: eventId, sg_message_id: messageId } = checked.output;
    // Broken bytes were decoded as U+FFFD: harmless in a text field, but an id or event name
    // that lost bytes names nothing for certain.
    if (broken.has(index) && [event, eventId, messageId ?? ""].some((text) => text.includes("\ufffd"))) {
      batch.rejected.push({
        index,
        reason: "invalid_utf8",
        detail: "event, sg_event_id or sg_message_id is not valid UTF-8",
      });
      return;
    }
    const unknown: string[] = [];
    const known: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(item)) {
      if (KNOWN_FIELDS.has(key)) known[key] = value;
      else unknown.push(clip(makeStorable(key)));
    }
    const replaced: string[] = [];
    const payload = repair(known, "", 0, replaced);
    if (payload === undefined) {
      batch.rejected.push({ index, reason: "invalid_event", detail: `nested deeper than ${MAX_DEPTH} levels` });
      return;
    }
    if (unknown.length > 0) batch.repaired.push({ index, reason: "unknown_fields", fields: unknown.slice(0, 20) });
    if (replaced.length > 0) {
      batch.repaired.push({
        index,
        reason: "unstorable_text",
        fields: replaced.slice(0, 20).map((path) => clip(path.slice(1))),
      });
    }
    if (broken.has(index)) {
      const fields = replacementPaths(payload.value, "");
      batch.repaired.push({ index, reason: "invalid_utf8", fields: fields.slice(0, 20).map(clip) });
    }
    batch.accepted.push({
      index,
      eventId,
      messageId,
      event,
      payload: payload.value as Record<string, unknown>,
    });
  });
  return batch;
}
