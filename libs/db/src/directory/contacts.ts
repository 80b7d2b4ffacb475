import type { Database } from "../pool.js";
import type { RowPick } from "../rows.js";
import type { userContacts } from "../schema/index.js";

// A user's addresses and the record of their changes: the ingest API's reads and writes.

export type ContactsRow = RowPick<typeof userContacts, "email" | "phone" | "updated_at">;

/** The user's addresses; undefined for a user without a record. */
export async function readContacts(database: Database, userId: string): Promise<ContactsRow | undefined> {
  const [row] = await database.sql<ContactsRow[]>`
    select email, phone, updated_at from user_contacts where user_id = ${userId}`;
  return row;
}

/**
 * Replaces both of the user's addresses (creating the record), answering what was stored. When
 * an address changes, the change (which fields, by which key of which client) is recorded in the
 * same transaction, compared with the row as locked, so no change goes unrecorded whatever
 * writes run beside it.
 */
export async function writeContacts(
  database: Database,
  userId: string,
  input: { email: string | null; phone: string | null },
  by: { clientId: string; keyId: string },
): Promise<ContactsRow> {
  return database.sql.begin(async (tx) => {
    const [previous] = await tx<{ email: string | null; phone: string | null }[]>`
      select email, phone from user_contacts where user_id = ${userId} for update`;
    const [row] = await tx<ContactsRow[]>`
      insert into user_contacts (user_id, email, phone, updated_at) values (${userId}, ${input.email}, ${input.phone}, now())
      on conflict (user_id) do update set email = excluded.email, phone = excluded.phone, updated_at = now()
      returning email, phone, updated_at`;
    const fields = [
      ...((previous?.email ?? null) === input.email ? [] : ["email"]),
      ...((previous?.phone ?? null) === input.phone ? [] : ["phone"]),
    ];
    if (fields.length > 0) {
      await tx`insert into contact_changes (user_id, client_id, key_id, fields)
        values (${userId}, ${by.clientId}, ${by.keyId}, ${fields})`;
    }
    return row as ContactsRow;
  });
}

/** One recorded change of a user's addresses. */
export interface ContactChange {
  fields: string[];
  client_id: string;
  key_id: string;
  changed_at: string;
}

/** The user's recorded address changes, newest first (at most `limit`). */
export async function listContactChanges(database: Database, userId: string, limit: number): Promise<ContactChange[]> {
  const rows = await database.sql<{ fields: string[]; client_id: string; key_id: string; changed_at: Date }[]>`
    select fields, client_id, key_id, changed_at from contact_changes where user_id = ${userId} order by id desc limit ${limit}`;
  return rows.map((row) => ({ ...row, changed_at: row.changed_at.toISOString() }));
}
