import { runMigrations } from "./setup/migrate.js";
import {
  type AppRole,
  applyAppRoles,
  appRolesProblem,
  DB_APPS,
  type DbApp,
  dbPasswordVariable,
  dbRoleName,
} from "./setup/roles.js";

// npm run db:migrate, and compose's migrate job: applies drizzle/ migrations to DATABASE_URL.
// Given every app's role password (NOTIFY_<APP>_DB_PASSWORD), it then creates or updates the
// apps' own roles (notify_<app>) with their privileges (setup/roles.ts); given none, it leaves roles
// alone, as `npm start` and a database of one owner want.
const url = process.env.DATABASE_URL;
if (!url) {
  process.stderr.write("DATABASE_URL is not set\n");
  process.exit(78);
}
const given = DB_APPS.filter((app) => process.env[dbPasswordVariable(app)]);
if (given.length > 0 && given.length < DB_APPS.length) {
  const missing = DB_APPS.filter((app) => !given.includes(app)).map(dbPasswordVariable);
  process.stderr.write(`every app's role password or none: ${missing.join(", ")} not set\n`);
  process.exit(78);
}
const roles = Object.fromEntries(
  DB_APPS.map((app) => [app, { name: dbRoleName(app), password: process.env[dbPasswordVariable(app)] ?? "" }]),
) as Record<DbApp, AppRole>;
const problem = given.length > 0 ? appRolesProblem(roles) : undefined;
if (problem !== undefined) {
  process.stderr.write(`${problem}\n`);
  process.exit(78);
}
await runMigrations(url);
process.stdout.write("migrations applied\n");
if (given.length > 0) {
  const applied = await applyAppRoles(url, roles);
  process.stdout.write(`roles applied: ${DB_APPS.map(dbRoleName).join(", ")}\n`);
  // Granted to no app until libs/db/src/setup/roles.ts says who may use them.
  for (const table of applied.undecided) process.stderr.write(`table ${table}: no app may use it (setup/roles.ts)\n`);
}
