import { type ContactsRow, type Database, readContacts } from "@notify/db";
import { toAppError } from "@notify/http";
import type { ContactsResponse } from "./schemas.js";

export interface StoredContacts {
  contacts: ContactsResponse;
  /** When the addresses were last written; null for a user without a record. */
  updatedAt: Date | null;
}

export const toStoredContacts = (userId: string, row: ContactsRow | undefined): StoredContacts => ({
  contacts: { user_id: userId, email: row?.email ?? null, phone: row?.phone ?? null },
  updatedAt: row?.updated_at ?? null,
});

/** GET /api/v1/users/{id}/contacts: a user without a record has no addresses. */
export async function getContacts(database: Database, userId: string): Promise<StoredContacts> {
  try {
    return toStoredContacts(userId, await readContacts(database, userId));
  } catch (error) {
    throw toAppError(error);
  }
}
