import { newWebhookEndpointId, newWebhookSecret } from "@notify/core";
import type { Database } from "../pool.js";

/**
 * A client's webhook endpoints: created, listed, changed, deleted and given a new secret. Every
 * verb takes the owning client and touches no other client's endpoint; the answers are the API's
 * shape (snake_case, RFC 3339 UTC timestamps). A secret is in the answers to create and rotate
 * only.
 */

export type EndpointStatus = "enabled" | "disabled";

export interface WebhookEndpointRecord {
  id: string;
  client_id: string;
  url: string;
  /** The event types it receives; null: every type. */
  event_types: string[] | null;
  /** What its events carry beyond ids and outcomes: `notification_data`, `recipient`. */
  include: string[];
  description: string | null;
  status: EndpointStatus;
  /** `by_client` or `failing`; null while enabled. */
  disabled_reason: string | null;
  disabled_at: string | null;
  /** Since when every attempt failed; null when the last one succeeded or none was made. */
  failing_since: string | null;
  /** While a rotation's grace lasts, the previous secret signs too, until this instant. */
  previous_secret_expires_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface IssuedWebhookEndpoint extends WebhookEndpointRecord {
  secret: string;
}

interface EndpointRow {
  id: string;
  client_id: string;
  url: string;
  event_types: string[] | null;
  include: string[];
  description: string | null;
  status: string;
  disabled_reason: string | null;
  disabled_at: Date | null;
  failing_since: Date | null;
  previous_secret_expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = `id, client_id, url, event_types, include, description, status, disabled_reason, disabled_at,
  failing_since, previous_secret_expires_at, created_at, updated_at`;

const iso = (date: Date | null) => date?.toISOString() ?? null;

const toRecord = (row: EndpointRow): WebhookEndpointRecord => ({
  id: row.id,
  client_id: row.client_id,
  url: row.url,
  event_types: row.event_types,
  include: row.include,
  description: row.description,
  status: row.status as EndpointStatus,
  disabled_reason: row.disabled_reason,
  disabled_at: iso(row.disabled_at),
  failing_since: iso(row.failing_since),
  // A grace that has ended is no longer news.
  previous_secret_expires_at:
    row.previous_secret_expires_at !== null && row.previous_secret_expires_at.getTime() > Date.now()
      ? row.previous_secret_expires_at.toISOString()
      : null,
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString(),
});

export interface EndpointInput {
  url: string;
  eventTypes: string[] | null;
  include: string[];
  description: string | null;
}

/**
 * A new endpoint with its secret; "limit_reached" when the client already has `maxPerClient`.
 * The count and the insert hold a lock of the client's until they commit: a count alone sees
 * none of the rows that concurrent creates have not committed yet, and each would insert.
 */
export async function createEndpoint(
  database: Database,
  clientId: string,
  input: EndpointInput,
  maxPerClient: number,
): Promise<IssuedWebhookEndpoint | "limit_reached"> {
  const secret = newWebhookSecret();
  return database.sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtextextended('webhook_endpoints:' || ${clientId}::text, 0))`;
    const [held] = await tx<Array<{ count: string }>>`
      select count(*) from webhook_endpoints where client_id = ${clientId}`;
    if (Number(held?.count) >= maxPerClient) return "limit_reached" as const;
    const [row] = await tx<EndpointRow[]>`
      insert into webhook_endpoints (id, client_id, url, event_types, include, description, secret)
      values (${newWebhookEndpointId()}, ${clientId}, ${input.url},
        ${input.eventTypes}::text[], ${input.include}::text[], ${input.description}, ${secret})
      returning ${tx.unsafe(COLUMNS)}`;
    return { ...toRecord(row as EndpointRow), secret };
  });
}

export async function getEndpoint(
  database: Database,
  clientId: string,
  id: string,
): Promise<WebhookEndpointRecord | undefined> {
  const [row] = await database.sql<EndpointRow[]>`
    select ${database.sql.unsafe(COLUMNS)} from webhook_endpoints where id = ${id} and client_id = ${clientId}`;
  return row && toRecord(row);
}

/** A client's endpoints, oldest first; with a null client every client's (the operator's view). */
export async function listEndpoints(database: Database, clientId: string | null): Promise<WebhookEndpointRecord[]> {
  const { sql } = database;
  const rows = await sql<EndpointRow[]>`
    select ${sql.unsafe(COLUMNS)} from webhook_endpoints
    ${clientId === null ? sql`` : sql`where client_id = ${clientId}`}
    order by created_at, id`;
  return rows.map(toRecord);
}

export interface EndpointChange {
  url?: string;
  eventTypes?: string[] | null;
  include?: string[];
  description?: string | null;
  /** Enabling clears the failure record: the client says the endpoint works again. */
  enabled?: boolean;
}

/** Changes what is given; undefined when the client (null: any client) has no such endpoint. */
export async function updateEndpoint(
  database: Database,
  clientId: string | null,
  id: string,
  change: EndpointChange,
): Promise<WebhookEndpointRecord | undefined> {
  const { sql } = database;
  const enabled = change.enabled;
  const [row] = await sql<EndpointRow[]>`
    update webhook_endpoints set
      url = ${change.url === undefined ? sql`url` : sql`${change.url}`},
      event_types = ${
        change.eventTypes === undefined
          ? sql`event_types`
          : change.eventTypes === null
            ? sql`null`
            : sql`${change.eventTypes}::text[]`
      },
      include = ${change.include === undefined ? sql`include` : sql`${change.include}::text[]`},
      description = ${
        change.description === undefined
          ? sql`description`
          : change.description === null
            ? sql`null`
            : sql`${change.description}`
      },
      status = ${enabled === undefined ? sql`status` : enabled ? sql`'enabled'` : sql`'disabled'`},
      disabled_reason = ${
        enabled === undefined
          ? sql`disabled_reason`
          : enabled
            ? sql`null`
            : sql`case when status = 'disabled' then disabled_reason else 'by_client' end`
      },
      disabled_at = ${
        enabled === undefined
          ? sql`disabled_at`
          : enabled
            ? sql`null`
            : sql`case when status = 'disabled' then disabled_at else now() end`
      },
      failing_since = ${enabled === true ? sql`null` : sql`failing_since`},
      updated_at = now()
    where id = ${id} ${clientId === null ? sql`` : sql`and client_id = ${clientId}`}
    returning ${sql.unsafe(COLUMNS)}`;
  return row && toRecord(row);
}

/** Deletes the endpoint with its deliveries and attempts; false when the client has no such endpoint. */
export async function deleteEndpoint(database: Database, clientId: string, id: string): Promise<boolean> {
  const rows =
    await database.sql`delete from webhook_endpoints where id = ${id} and client_id = ${clientId} returning id`;
  return rows.length > 0;
}

/**
 * A new signing secret; the one it replaces keeps signing (both signatures are sent) for
 * `graceSeconds`, so a receiver can change its secret in that time without refusing a post.
 */
export async function rotateEndpointSecret(
  database: Database,
  clientId: string,
  id: string,
  graceSeconds: number,
): Promise<IssuedWebhookEndpoint | undefined> {
  const secret = newWebhookSecret();
  const [row] = await database.sql<EndpointRow[]>`
    update webhook_endpoints set
      previous_secret = secret,
      previous_secret_expires_at = now() + make_interval(secs => ${graceSeconds}),
      secret = ${secret},
      updated_at = now()
    where id = ${id} and client_id = ${clientId}
    returning ${database.sql.unsafe(COLUMNS)}`;
  return row && { ...toRecord(row), secret };
}
