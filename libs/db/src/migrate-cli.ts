import { runMigrations } from "./migrate.js";

// npm run db:migrate: applies drizzle/ migrations to DATABASE_URL.
const url = process.env.DATABASE_URL;
if (!url) {
  process.stderr.write("DATABASE_URL is not set\n");
  process.exit(78);
}
await runMigrations(url);
process.stdout.write("migrations applied\n");
