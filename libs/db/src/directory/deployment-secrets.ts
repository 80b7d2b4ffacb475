import { type CredentialKeys, credentialKeys, newDeploymentSecret } from "@notify/core";
import type { Database } from "../pool.js";

// The deployment's secrets, created by the first process that needs one: the MAC keys of API
// keys and inbox tokens come from the `credentials` secret.

const secrets = new WeakMap<Database, Promise<CredentialKeys>>();

/**
 * The MAC keys of this deployment's credentials, from the `credentials` secret in
 * deployment_secrets, created by whichever process needs it first (every process then reads the
 * same one). Read once per pool; a failed read is retried by the next call.
 */
export function loadCredentialKeys(database: Database): Promise<CredentialKeys> {
  let loading = secrets.get(database);
  if (loading === undefined) {
    loading = (async () => {
      const read = () => database.sql<{ secret: string }[]>`
        select secret from deployment_secrets where name = 'credentials'`;
      let [row] = await read();
      if (row === undefined) {
        // Two processes may start at once: the one whose insert loses reads the winner's in a
        // statement of its own (one statement's snapshot would not see it).
        await database.sql`insert into deployment_secrets (name, secret) values ('credentials', ${newDeploymentSecret()})
          on conflict (name) do nothing`;
        [row] = await read();
      }
      if (row === undefined) throw new Error("the deployment's credentials secret could not be read");
      return credentialKeys(row.secret);
    })();
    loading.catch(() => secrets.delete(database));
    secrets.set(database, loading);
  }
  return loading;
}
