import type { Database } from "@notify/db";
import { asDependencyError } from "../dependency.js";
import type { ContactsResponse } from "./schemas.js";

export interface StoredContacts {
  contacts: ContactsResponse;
  /** When the addresses were last written; null for a user without a record. */
  updatedAt: Date | null;
}

export type ContactsRow = { email: string | null; phone: string | null; updated_at: Date };

export const toStoredContacts = (userId: string, row: ContactsRow | undefined): StoredContacts => ({
  contacts: { user_id: userId, email: row?.email ?? null, phone: row?.phone ?? null },
  updatedAt: row?.updated_at ?? null,
});

/** GET /api/v1/users/{id}/contacts: a user without a record has no addresses. */
export async function getContacts(database: Database, userId: string): Promise<StoredContacts> {
  try {
    const [row] = await database.sql<ContactsRow[]>`
      select email, phone, updated_at from user_contacts where user_id = ${userId}`;
    return toStoredContacts(userId, row);
  } catch (error) {
    throw asDependencyError(error, "postgres");
  }
}
