import t from "tap";
import * as v from "valibot";
import { bool, ConfigError, common, int, parseConfig, port } from "../src/index.js";

const problemsOf = (env: Record<string, string>): ConfigError => {
  try {
    parseConfig(Schema, env);
  } catch (error) {
    return error as ConfigError;
  }
  throw new Error("expected a ConfigError");
};

const Schema = v.object({ ...common, PORT: port(3000), WORKERS: int(4, 1, 64), VERBOSE: bool(false) });

t.test("defaults fill what is unset and strings become typed values", async (t) => {
  const config = parseConfig(Schema, { DATABASE_URL: "postgres://localhost/db", PORT: "8080", VERBOSE: "true" });
  t.equal(config.PORT, 8080);
  t.equal(config.WORKERS, 4);
  t.equal(config.VERBOSE, true);
  t.equal(config.NATS_URL, "nats://127.0.0.1:4222");
  t.equal(config.LANE_PARTITIONS, 16);
});

t.test("every problem is listed at once, naming the variable", async (t) => {
  const error = problemsOf({ PORT: "http", WORKERS: "0", LANE_PARTITIONS: "999", LOG_LEVEL: "loud" });
  t.ok(error instanceof ConfigError);
  const keys = error.problems.map((p) => p.split(":")[0]).sort();
  t.same(keys, ["DATABASE_URL", "LANE_PARTITIONS", "LOG_LEVEL", "PORT", "WORKERS"]);
  t.match(error.message, /DATABASE_URL: is required/);
});

t.test("an unset required variable is reported as unset", async (t) => {
  const error = problemsOf({});
  t.match(error.problems.join("\n"), /DATABASE_URL: is required \(got unset\)/);
});

t.test("a secret or a URL with a password is never echoed in a problem", async (t) => {
  const error = problemsOf({ DATABASE_URL: "postgres://app:hunter2@db:notaport/x", PORT: "1" });
  t.notMatch(error.message, /hunter2/);
  t.match(error.message, /DATABASE_URL: .*\[redacted\]/);
});
