import { PublishRejectedError, PublishTimeoutError } from "@notify/bus";
import { toAppError } from "@notify/http";
import t from "tap";

t.test("connection failures are outages (503); a Postgres error outside the transient classes is a 500", async (t) => {
  const system = (code: string) => Object.assign(new Error(code), { code });
  const pg = (code: string) => Object.assign(new Error(code), { name: "PostgresError", code });
  for (const error of [
    system("EPIPE"),
    system("ECONNRESET"),
    system("ECONNREFUSED"),
    system("CONNECTION_CLOSED"),
    pg("08006"),
    pg("57P01"),
    pg("53300"),
    pg("40001"),
  ]) {
    const answer = toAppError(error);
    t.equal(answer.status, 503, error.message);
    t.equal(answer.context?.retryAfterSeconds, 1, "with Retry-After");
  }
  for (const error of [pg("23505"), pg("42P01"), pg("22P02"), new Error("x"), new TypeError("x")])
    t.equal(toAppError(error).status, 500, `${error.name} ${error.message}`);
});

t.test("the bus's own publish errors: no ack in time and a 503 answer are outages, a refusal is not", async (t) => {
  t.equal(toAppError(new PublishTimeoutError("no JetStream ack within 3000 ms")).status, 503);
  t.equal(toAppError(new PublishRejectedError(503, "No Responders")).status, 503);
  t.equal(toAppError(new PublishRejectedError(400, "bad request", 10003)).status, 500);
  t.equal(new PublishTimeoutError("no ack").name, "TimeoutError", "what the ingestor treats as an unknown outcome");
});
