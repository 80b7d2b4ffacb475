import { type Database, writeContacts } from "@notify/db";
import { toAppError } from "@notify/http";
import { type StoredContacts, toStoredContacts } from "./get-contacts.js";
import type { ContactsRequest } from "./schemas.js";

/**
 * PUT /api/v1/users/{id}/contacts: replaces both addresses, recording a change with the key
 * that made it (`by`). Routing reads them through the same cache as preferences, which the
 * route's announcement clears.
 */
export async function putContacts(
  database: Database,
  userId: string,
  input: ContactsRequest,
  by: { clientId: string; keyId: string },
): Promise<StoredContacts> {
  try {
    return toStoredContacts(
      userId,
      await writeContacts(database, userId, { email: input.email, phone: input.phone }, by),
    );
  } catch (error) {
    throw toAppError(error);
  }
}
