import { createHmac, timingSafeEqual } from "node:crypto";
import { AppError } from "./errors.js";

/**
 * Keyset cursors (AIP-158). A cursor carries the sort key of the
 * last item returned, `created_at` in microseconds (Postgres' precision: milliseconds would
 * skip or repeat rows that share a millisecond) and the id that breaks ties. It is bound by an
 * HMAC to a context (the client, the list and its filters), so a cursor that was edited, built
 * by hand, issued for other filters or to another client fails its check and is refused; the
 * first byte is the encoding version, so a cursor of an older encoding is refused by name
 * instead of being misread.
 *
 * Layout before base64url: version (1 byte) | MAC (16 bytes) | micros (8 bytes, signed, BE) | id (UTF-8).
 */
export const CURSOR_VERSION = 1;

const MAC_BYTES = 16;
const HEADER = 1 + MAC_BYTES + 8;
/**
 * The longest id is a suppression's key (an address of up to 320 characters, its client and
 * channel, in UTF-8); anything longer is not a cursor of ours.
 */
const MAX_CURSOR_CHARS = 4096;

export interface KeysetPosition {
  /** created_at as microseconds since the Unix epoch. */
  micros: bigint;
  id: string;
}

const mac = (secret: string, context: string, body: Buffer) =>
  createHmac("sha256", secret)
    .update(`notify-cursor\0${CURSOR_VERSION}\0${context}\0`)
    .update(body)
    .digest()
    .subarray(0, MAC_BYTES);

export function encodeCursor(secret: string, context: string, position: KeysetPosition): string {
  const id = Buffer.from(position.id, "utf8");
  const body = Buffer.alloc(8 + id.length);
  body.writeBigInt64BE(position.micros, 0);
  id.copy(body, 8);
  return Buffer.concat([Buffer.of(CURSOR_VERSION), mac(secret, context, body), body]).toString("base64url");
}

const invalid = (why: string) =>
  new AppError("invalid_cursor", `cursor: ${why}`, { fields: [{ field: "cursor", message: why }] });

/** The position a cursor encodes, or an `invalid_cursor` AppError (400). */
export function decodeCursor(secret: string, context: string, cursor: string): KeysetPosition {
  if (cursor.length > MAX_CURSOR_CHARS || !/^[A-Za-z0-9_-]+$/.test(cursor)) {
    throw invalid("not a cursor of this list");
  }
  const bytes = Buffer.from(cursor, "base64url");
  // Base64 has several spellings of the same bytes: only the one we issue is accepted.
  if (bytes.length < 1 || bytes.toString("base64url") !== cursor) throw invalid("not a cursor of this list");
  if (bytes[0] !== CURSOR_VERSION) {
    throw invalid("issued by another version of this list; start again without a cursor");
  }
  if (bytes.length <= HEADER) throw invalid("not a cursor of this list");
  const body = bytes.subarray(1 + MAC_BYTES);
  if (!timingSafeEqual(bytes.subarray(1, 1 + MAC_BYTES), mac(secret, context, body))) {
    throw invalid("not issued for this list, these filters or this client; start again without a cursor");
  }
  return { micros: body.readBigInt64BE(0), id: body.subarray(8).toString("utf8") };
}
