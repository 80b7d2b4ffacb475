import { randomBytes } from "node:crypto";
import { type AppRole, applyAppRoles, DB_APPS, type DbApp } from "@notify/db";
import postgres from "postgres";
import { TEST_PG_URL } from "./services.js";

export interface AppRoles {
  roles: Record<DbApp, AppRole>;
  /** Each app's DATABASE_URL: `url` as its own role. */
  urls: Record<DbApp, string>;
  /** What applyAppRoles answered. */
  undecided: string[];
  absent: string[];
}

/**
 * Each app's own role on the database at `url` (a superuser's URL), as compose's migrate job
 * makes them (applyAppRoles), under names of this test file's own: roles are the server's, and
 * files run in parallel. Dropped on teardown, with the privileges they hold.
 */
export async function freshAppRoles(t: { teardown(fn: () => unknown): void }, url: string): Promise<AppRoles> {
  const prefix = `notify_t${randomBytes(5).toString("hex")}`;
  const roles = Object.fromEntries(
    DB_APPS.map((app) => [app, { name: `${prefix}_${app}`, password: randomBytes(24).toString("hex") }]),
  ) as Record<DbApp, AppRole>;
  t.teardown(async () => {
    const own = postgres(url, { max: 1, onnotice: () => {} });
    const server = postgres(TEST_PG_URL, { max: 1, onnotice: () => {} });
    for (const { name } of Object.values(roles)) {
      await own.unsafe(`drop owned by "${name}"`).catch(() => {});
      await server.unsafe(`drop role if exists "${name}"`).catch(() => {});
    }
    await own.end();
    await server.end();
  });
  const applied = await applyAppRoles(url, roles);
  const urls = Object.fromEntries(
    DB_APPS.map((app) => {
      const as = new URL(url);
      as.username = roles[app].name;
      as.password = roles[app].password;
      return [app, as.toString()];
    }),
  ) as Record<DbApp, string>;
  return { roles, urls, ...applied };
}
