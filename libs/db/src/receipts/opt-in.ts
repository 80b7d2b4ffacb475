import type { Database } from "../pool.js";

/**
 * Lifts a number's carrier opt-out (its every-client sms entry, when that entry's reason is
 * carrier_opt_out), as its START reply asks. An entry for any other reason stays: a number that
 * hard-bounced cannot receive whatever it sends, and an operator's entry is the operator's to
 * lift. `address` arrives normalised. Answers whether an entry was removed.
 */
export async function liftCarrierOptOut(database: Database, address: string): Promise<boolean> {
  const rows = await database.sql`
    delete from suppressions
    where channel = 'sms' and address = ${address} and client_id = '' and reason = 'carrier_opt_out'
    returning 1`;
  return rows.length > 0;
}
