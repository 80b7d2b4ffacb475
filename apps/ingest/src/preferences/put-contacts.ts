import type { Database } from "@notify/db";
import { asDependencyError } from "../dependency.js";
import { type ContactsRow, type StoredContacts, toStoredContacts } from "./get-contacts.js";
import type { ContactsRequest } from "./schemas.js";

/**
 * PUT /api/v1/users/{id}/contacts: replaces both addresses. Routing reads them through the
 * same cache as preferences, so it sees the change within 5 s.
 */
export async function putContacts(database: Database, userId: string, input: ContactsRequest): Promise<StoredContacts> {
  try {
    const [row] = await database.sql<ContactsRow[]>`
      insert into user_contacts (user_id, email, phone, updated_at) values (${userId}, ${input.email}, ${input.phone}, now())
      on conflict (user_id) do update set email = excluded.email, phone = excluded.phone, updated_at = now()
      returning email, phone, updated_at`;
    return toStoredContacts(userId, row);
  } catch (error) {
    throw asDependencyError(error, "postgres");
  }
}
