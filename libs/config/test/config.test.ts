import t from "tap";
import * as v from "valibot";
import { bool, ConfigError, common, int, parseConfig, port, preauthThrottle } from "../src/index.js";

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

t.test("TRUSTED_PROXIES: addresses and CIDR ranges, anything else named", async (t) => {
  const ProxySchema = v.object({ ...preauthThrottle() });
  t.same(parseConfig(ProxySchema, {}).TRUSTED_PROXIES, [], "unset: none");
  t.same(parseConfig(ProxySchema, { TRUSTED_PROXIES: " 10.0.0.0/8, 192.0.2.7 ,fd00::/8," }).TRUSTED_PROXIES, [
    { address: "10.0.0.0", prefix: 8, family: 4 },
    { address: "192.0.2.7", family: 4 },
    { address: "fd00::", prefix: 8, family: 6 },
  ]);
  for (const bad of ["10.0.0.0/33", "fd00::/129", "proxy.internal", "10.0.0.0/8/1", "10.0.0.0/x", "300.1.1.1"]) {
    let problems: string[] = [];
    try {
      parseConfig(ProxySchema, { TRUSTED_PROXIES: `10.0.0.1, ${bad}` });
    } catch (error) {
      problems = (error as ConfigError).problems;
    }
    t.equal(problems.length, 1, `${bad} is refused`);
    t.match(problems[0], /^TRUSTED_PROXIES: .* is not an IP address or a CIDR range/);
  }
});
