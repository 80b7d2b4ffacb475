import type { Database } from "../pool.js";

// Ingest accepts a broadcast: one row, idempotent per (client, Idempotency-Key); the
// processor expands it into notifications (expand.ts).

export interface NewBroadcast {
  id: string;
  clientId: string;
  idempotencyKey: string;
  requestHash: string;
  audienceId: string;
  category: string;
  templateId: string;
  templateVersion: number;
  channels: string[] | null;
  data: Record<string, unknown>;
}

export type InsertedBroadcast =
  | { kind: "inserted"; id: string; total: number }
  /** The client already used this Idempotency-Key: the broadcast it created. */
  | { kind: "existing"; id: string; requestHash: string; total: number; status: string }
  | { kind: "no_audience" };

/**
 * Stores a broadcast with its audience's member count as `total`, idempotent per
 * (client, Idempotency-Key) for as long as the broadcast exists: a repeat finds the first.
 */
export async function insertBroadcast(database: Database, input: NewBroadcast): Promise<InsertedBroadcast> {
  const { sql } = database;
  const [inserted] = await sql<{ id: string; total: number }[]>`
    insert into broadcasts (id, client_id, dedup_key, request_hash, audience_id, category, template_id,
      template_version, requested_channels, data, status, total)
    select ${input.id}, ${input.clientId}, ${input.idempotencyKey}, ${input.requestHash}, a.id, ${input.category},
      ${input.templateId}, ${input.templateVersion}, ${input.channels}::text[], ${sql.json(input.data as never)},
      'expanding', a.member_count
    from audiences a where a.id = ${input.audienceId}
    on conflict (client_id, dedup_key) do nothing
    returning id, total::float8 as total`;
  if (inserted) return { kind: "inserted", id: inserted.id, total: Number(inserted.total) };
  const [existing] = await sql<{ id: string; request_hash: string; total: number; status: string }[]>`
    select id, request_hash, total::float8 as total, status from broadcasts
    where client_id = ${input.clientId} and dedup_key = ${input.idempotencyKey}`;
  if (!existing) return { kind: "no_audience" };
  return {
    kind: "existing",
    id: existing.id,
    requestHash: existing.request_hash,
    total: Number(existing.total),
    status: existing.status,
  };
}
