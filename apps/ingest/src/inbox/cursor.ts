import { createHash } from "node:crypto";
import { AppError } from "@notify/core";

/**
 * Inbox cursors (AIP-158): opaque, versioned and bound to the user and the
 * filter they were issued for, so a cursor from an older encoding, another filter or another
 * user is refused with a 400 instead of being misread. Authorisation never rests on it: every
 * page is still confined to the token's user.
 */
const VERSION = 1;

const check = (userId: string, filter: string, lastId: number) =>
  createHash("sha256").update(`${VERSION}|${userId}|${filter}|${lastId}`).digest("base64url").slice(0, 16);

export const encodeCursor = (userId: string, filter: string, lastId: number): string =>
  Buffer.from(JSON.stringify({ v: VERSION, f: filter, id: lastId, c: check(userId, filter, lastId) })).toString(
    "base64url",
  );

export function decodeCursor(cursor: string, userId: string, filter: string): number {
  const invalid = (why: string) =>
    new AppError("validation_failed", `cursor: ${why}`, { fields: [{ field: "cursor", message: why }] });
  let value: { v?: unknown; f?: unknown; id?: unknown; c?: unknown };
  try {
    value = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw invalid("not a cursor of this list");
  }
  if (value.v !== VERSION) throw invalid("from another version of this list; start again without one");
  if (value.f !== filter) throw invalid("issued for another filter");
  if (typeof value.id !== "number" || !Number.isSafeInteger(value.id) || value.c !== check(userId, filter, value.id)) {
    throw invalid("not a cursor of this list");
  }
  return value.id;
}
