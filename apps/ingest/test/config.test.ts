import { ConfigError, parseConfig } from "@notify/config";
import t from "tap";
import { IngestConfig } from "../src/config.js";

const env = { DATABASE_URL: "postgres://localhost/notify" };

t.test("CURSOR_SECRET is required, never generated", async (t) => {
  const problems = (input: Record<string, string>) => {
    try {
      parseConfig(IngestConfig, input);
      return [];
    } catch (error) {
      if (error instanceof ConfigError) return error.problems;
      throw error;
    }
  };
  t.match(problems(env), [/^CURSOR_SECRET: is required/]);
  const short = problems({ ...env, CURSOR_SECRET: "too-short" });
  t.match(short, [/^CURSOR_SECRET: must be at least 32 characters/]);
  t.notMatch(short.join(), /too-short/, "the secret is never echoed");
  t.equal(parseConfig(IngestConfig, { ...env, CURSOR_SECRET: "x".repeat(32) }).CURSOR_SECRET, "x".repeat(32));
});

t.test("the v1 sunset and deprecation dates are days the calendar has", async (t) => {
  const base = { ...env, CURSOR_SECRET: "x".repeat(32) };
  t.equal(
    parseConfig(IngestConfig, { ...base, API_V1_SUNSET_AT: "2027-02-28T00:00:00Z" }).API_V1_SUNSET_AT?.toISOString(),
    "2027-02-28T00:00:00.000Z",
  );
  // Refused, not read as 2027-03-02: that would send the Sunset header and answer 410 two days late.
  t.throws(() => parseConfig(IngestConfig, { ...base, API_V1_SUNSET_AT: "2027-02-30T00:00:00Z" }), ConfigError);
  t.throws(() => parseConfig(IngestConfig, { ...base, API_V1_DEPRECATED_AT: "2027-06-31T00:00:00Z" }), ConfigError);
});
