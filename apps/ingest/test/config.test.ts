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
