import t from "tap";
import { asDependencyError } from "../src/dependency.js";

t.test("connection failures are outages (503); a Postgres error outside the connection classes is a 500", async (t) => {
  const system = (code: string) => Object.assign(new Error(code), { code });
  const pg = (code: string) => Object.assign(new Error(code), { name: "PostgresError", code });
  for (const error of [
    system("EPIPE"),
    system("ECONNRESET"),
    system("ECONNREFUSED"),
    system("CONNECTION_CLOSED"),
    new Error("x"),
    pg("08006"),
    pg("57P01"),
    pg("53300"),
  ]) {
    t.equal(asDependencyError(error, "postgres").status, 503, `${(error as { code?: string }).code ?? error.message}`);
  }
  for (const error of [pg("23505"), pg("42P01"), pg("22P02")])
    t.equal(asDependencyError(error, "postgres").status, 500, error.message);
});
