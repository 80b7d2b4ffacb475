import { type CredentialKeys, credentialKeys, newDeploymentSecret, unsubscribeKey } from "@notify/core";
import type { Database } from "../pool.js";

// The deployment's secrets, created by the first process that needs one: the MAC keys of API
// keys and inbox tokens come from the `credentials` secret, those of unsubscribe links from the
// `unsubscribe` secret (the workers mint the links, ingest checks them).

const secrets = new WeakMap<Database, Map<string, Promise<unknown>>>();

/**
 * What `derive` makes of the named secret in deployment_secrets, created by whichever process
 * needs it first (every process then reads the same one). Read once per pool and name; a failed
 * read is retried by the next call.
 */
function deploymentSecret<T>(database: Database, name: string, derive: (secret: string) => T): Promise<T> {
  let named = secrets.get(database);
  if (named === undefined) {
    named = new Map();
    secrets.set(database, named);
  }
  const pool = named;
  let loading = pool.get(name) as Promise<T> | undefined;
  if (loading === undefined) {
    loading = (async () => {
      const read = () => database.sql<{ secret: string }[]>`
        select secret from deployment_secrets where name = ${name}`;
      let [row] = await read();
      if (row === undefined) {
        // Two processes may start at once: the one whose insert loses reads the winner's in a
        // statement of its own (one statement's snapshot would not see it).
        await database.sql`insert into deployment_secrets (name, secret) values (${name}, ${newDeploymentSecret()})
          on conflict (name) do nothing`;
        [row] = await read();
      }
      if (row === undefined) throw new Error(`the deployment's ${name} secret could not be read`);
      return derive(row.secret);
    })();
    loading.catch(() => pool.delete(name));
    pool.set(name, loading);
  }
  return loading;
}

/** The MAC keys of this deployment's credentials, from the `credentials` secret. */
export const loadCredentialKeys = (database: Database): Promise<CredentialKeys> =>
  deploymentSecret(database, "credentials", credentialKeys);

/** The MAC key of this deployment's unsubscribe links, from the `unsubscribe` secret. */
export const loadUnsubscribeKey = (database: Database): Promise<Buffer> =>
  deploymentSecret(database, "unsubscribe", unsubscribeKey);
