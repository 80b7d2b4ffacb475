import { JetStreamApiError } from "@nats-io/jetstream";
import {
  ClosedConnectionError,
  ConnectionError,
  DrainingConnectionError,
  NoRespondersError,
  PermissionViolationError,
  RequestError,
  TimeoutError,
} from "@nats-io/nats-core";
import { connectBus } from "@notify/bus";
import { AppError } from "@notify/core";
import { createLogger } from "@notify/log";
import { captureLogger, freePort, TEST_NATS_URL, TEST_PG_URL } from "@notify/testing";
import fc from "fast-check";
import postgres from "postgres";
import t from "tap";
import { DEPENDENCY_RETRY_AFTER_SECONDS, newApp, toAppError, unavailableDependency } from "../src/index.js";

const system = (code: string) =>
  Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code, syscall: "connect" });
const pg = (code: string) => Object.assign(new Error(`sqlstate ${code}`), { name: "PostgresError", code });

t.test("connection-class failures are outages of the dependency that reported them", async (t) => {
  const cases: Array<[unknown, string, string]> = [
    ...["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH"].map(
      (code) => [system(code), "network", code] as [unknown, string, string],
    ),
    ...["CONNECTION_CLOSED", "CONNECTION_DESTROYED", "CONNECT_TIMEOUT", "CONNECTION_ENDED"].map(
      (code) => [system(code), "postgres", `postgres.js ${code}`] as [unknown, string, string],
    ),
    ...["08006", "08001", "53300", "53100", "57014", "57P01", "57P03", "58030", "40001", "40P01", "55P03"].map(
      (code) => [pg(code), "postgres", `SQLSTATE ${code}`] as [unknown, string, string],
    ),
    [system("57014"), "postgres", "postgres.js's own cancel (a plain Error with 57014)"],
    [new ConnectionError("connection refused"), "nats", "ConnectionError"],
    [new ClosedConnectionError(), "nats", "ClosedConnectionError"],
    [new DrainingConnectionError(), "nats", "DrainingConnectionError"],
    [new TimeoutError(), "nats", "TimeoutError"],
    [new NoRespondersError("$JS.API.INFO"), "nats", "NoRespondersError"],
    [new RequestError("connection disconnected"), "nats", "a RequestError of the client's own"],
    [new RequestError("no responders", { cause: new NoRespondersError("x") }), "nats", "RequestError(NoResponders)"],
    [new JetStreamApiError({ code: 503, err_code: 10008, description: "unavailable" }), "nats", "JetStream 503"],
    // JetStreamNotEnabled wraps RequestError(NoResponders) while JetStream is not up yet.
    [
      new Error("jetstream is not enabled", { cause: new RequestError("", { cause: new NoRespondersError("x") }) }),
      "nats",
      "a wrapper whose cause is an outage",
    ],
    [
      new Error("Failed query", { cause: pg("08006") }),
      "postgres",
      "drizzle's DrizzleQueryError around a PostgresError",
    ],
    [new AggregateError([system("ECONNREFUSED"), system("ECONNREFUSED")]), "network", "happy eyeballs"],
  ];
  for (const [error, dependency, why] of cases) {
    t.equal(unavailableDependency(error), dependency, why);
    const answer = toAppError(error);
    t.equal(answer.status, 503, `${why}: 503`);
    t.equal(answer.code, "dependency_unavailable");
    t.equal(answer.context?.retryAfterSeconds, DEPENDENCY_RETRY_AFTER_SECONDS);
    t.equal(answer.cause, error, "the cause is kept for the log");
  }
});

t.test("a bug, a constraint or a configuration problem stays a 500", async (t) => {
  const cases: Array<[unknown, string]> = [
    [pg("42P01"), "undefined table"],
    [pg("42601"), "syntax error"],
    [pg("23505"), "unique violation"],
    [pg("22P02"), "invalid text representation"],
    [pg("40003"), "statement completion unknown: not one of the retryable 40xxx"],
    [new TypeError("Cannot read properties of undefined"), "TypeError"],
    [new RangeError("Invalid time value"), "RangeError"],
    [new Error("connect ECONNREFUSED 127.0.0.1:5432"), "the message says ECONNREFUSED: messages are never read"],
    [new Error("connection closed"), "the message says connection closed: messages are never read"],
    [system("UNDEFINED_VALUE"), "postgres.js refusing an undefined parameter"],
    [new JetStreamApiError({ code: 404, err_code: 10059, description: "stream not found" }), "stream not found"],
    [new RequestError("permissions", { cause: new PermissionViolationError("denied", "publish", "x") }), "permission"],
    [new Error("wrapper", { cause: pg("42P01") }), "a wrapper around a bug"],
    [new Error("wrapper", { cause: new TypeError("x") }), "a wrapper around a TypeError"],
    ["ECONNREFUSED", "a string thrown"],
    [null, "null thrown"],
    [undefined, "undefined thrown"],
    [42, "a number thrown"],
  ];
  for (const [error, why] of cases) {
    t.equal(unavailableDependency(error), null, why);
    t.match(toAppError(error), { status: 500, code: "internal" }, why);
  }
  const own = new AppError("not_found", "no such thing");
  t.equal(toAppError(own), own, "an AppError answers as it is");
});

/**
 * Values that fight back when looked at, made inside the property (fast-check itself would
 * trip over a revoked Proxy): a revoked Proxy, throwing getters, a Proxy without a prototype,
 * a cycle of causes, a very deep chain.
 */
const hostile = fc.oneof(
  fc.constant(() => {
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    return proxy;
  }),
  fc.constantFrom("code", "name", "cause", "errors").map(
    (key) => () =>
      Object.defineProperty(new Error("x"), key, {
        get() {
          throw new Error("no looking");
        },
      }),
  ),
  fc.constant(
    () =>
      new Proxy(
        {},
        {
          getPrototypeOf() {
            throw new Error("no prototype");
          },
        },
      ),
  ),
  fc.constant(() => {
    const a: { cause?: unknown; code?: string } = {};
    a.cause = { cause: a };
    return a;
  }),
  fc.nat({ max: 5000 }).map((depth) => () => {
    let error: unknown = system("ECONNREFUSED");
    for (let i = 0; i < depth; i++) error = new Error("wrapped", { cause: error });
    return error;
  }),
);
/** Anything a route might throw, as a thunk. */
const thrown = fc.oneof(
  fc
    .anything({ withBigInt: true, withDate: true, withMap: true, withSet: true, withNullPrototype: true })
    .map((value) => () => value),
  hostile,
  fc
    .record({
      name: fc.string(),
      code: fc.oneof(fc.string(), fc.integer()),
      message: fc.string(),
      cause: fc.anything(),
    })
    .map((value) => () => value),
  fc.string().map((message) => () => new Error(message)),
);

t.test("arbitrary thrown values never crash the classifier, and answer 500 or 503", async (t) => {
  fc.assert(
    fc.property(thrown, (make) => {
      const value = make();
      const dependency = unavailableDependency(value);
      const answer = toAppError(value);
      return (
        (dependency === null || ["postgres", "nats", "network"].includes(dependency)) &&
        answer instanceof AppError &&
        (dependency === null ? answer.status === 500 : answer.status === 503)
      );
    }),
    { numRuns: 2000 },
  );
  fc.assert(
    fc.property(fc.string(), (message) => unavailableDependency(new Error(message)) === null),
    { numRuns: 500 },
  );
  t.pass();
});

t.test("wrapping an outage in causes keeps the verdict", async (t) => {
  const outage = fc.constantFrom<unknown>(
    system("ECONNRESET"),
    pg("57P01"),
    system("CONNECTION_CLOSED"),
    new TimeoutError(),
    new ClosedConnectionError(),
  );
  fc.assert(
    fc.property(outage, fc.integer({ min: 1, max: 20 }), (error, depth) => {
      let wrapped = error;
      for (let i = 0; i < depth; i++) wrapped = new Error(`layer ${i}`, { cause: wrapped });
      return unavailableDependency(wrapped) === unavailableDependency(error);
    }),
  );
  t.pass();
});

t.test("every app's onError answers any thrown value with problem+json: 503 with Retry-After, or 500", async (t) => {
  const app = newApp(createLogger({ name: "test", level: "silent" }));
  let next: unknown;
  app.get("/throw", () => {
    throw next;
  });
  await fc.assert(
    fc.asyncProperty(thrown, async (make) => {
      next = make();
      const response = await app.request("/throw");
      const body = (await response.json()) as { status: number; code: string; detail: string };
      if (response.headers.get("content-type") !== "application/problem+json") return false;
      if (!response.headers.get("x-request-id")) return false;
      if (response.status === 503) {
        return (
          body.code === "dependency_unavailable" &&
          response.headers.get("retry-after") === String(DEPENDENCY_RETRY_AFTER_SECONDS) &&
          body.detail === "Service temporarily unavailable"
        );
      }
      return response.status === 500 && body.code === "internal" && body.detail === "Internal server error";
    }),
    { numRuns: 300 },
  );
  next = system("ECONNREFUSED");
  const outage = await app.request("/throw");
  t.equal(outage.status, 503);
  t.notMatch(await outage.text(), /ECONNREFUSED|5432/, "no internals in the body");
});

t.test("a bug is logged as an error with its cause; an outage as a warning naming the dependency", async (t) => {
  const { log, lines } = captureLogger("http");
  const app = newApp(log);
  app.get("/bug", () => {
    throw new TypeError("undefined is not a function");
  });
  app.get("/outage", () => {
    throw system("ECONNREFUSED");
  });
  t.equal((await app.request("/bug")).status, 500);
  t.equal((await app.request("/outage")).status, 503);
  const logged = lines().map((line) => JSON.parse(line) as Record<string, unknown>);
  t.match(
    logged.find((l) => l.msg === "request failed"),
    { level: 50, code: "internal", err: { type: "TypeError", message: "undefined is not a function" } },
  );
  t.match(
    logged.find((l) => l.msg === "request failed: dependency unavailable"),
    { level: 40, code: "dependency_unavailable", dependency: "network", err: { code: "ECONNREFUSED" } },
  );
});

t.test("the errors the real clients throw", async (t) => {
  const sql = postgres(TEST_PG_URL, { max: 1, onnotice: () => {} });
  const other = postgres(TEST_PG_URL, { max: 1, onnotice: () => {} });
  // end() without a timeout waits forever for the connection the test terminates.
  t.teardown(() => Promise.all([sql.end({ timeout: 1 }), other.end({ timeout: 1 })]));
  const failure = async (query: () => Promise<unknown>) =>
    query().then(
      () => undefined,
      (error: unknown) => error,
    );

  t.equal(unavailableDependency(await failure(() => sql`select * from no_such_table`)), null, "42P01");
  t.equal(unavailableDependency(await failure(() => sql`select 1 / 0`)), null, "22012");
  t.equal(
    unavailableDependency(
      await failure(() => sql.begin((tx) => [tx`set local statement_timeout = 10`, tx`select pg_sleep(1)`])),
    ),
    "postgres",
    "57014 statement timeout",
  );
  await other`select pg_advisory_lock(7266099)`;
  t.equal(
    unavailableDependency(
      await failure(() => sql.begin((tx) => [tx`set local lock_timeout = 10`, tx`select pg_advisory_lock(7266099)`])),
    ),
    "postgres",
    "55P03 lock not available",
  );
  await other`select pg_advisory_unlock(7266099)`;
  const [{ pid }] = (await sql`select pg_backend_pid() as pid`) as unknown as [{ pid: number }];
  const killed = sql`select pg_sleep(5)`.then(
    () => undefined,
    (error: unknown) => error,
  );
  await new Promise((resolve) => setTimeout(resolve, 100));
  await other`select pg_terminate_backend(${pid})`;
  t.equal(unavailableDependency(await killed), "postgres", "57P01 terminated by an administrator");

  const closedPort = await freePort();
  const nowhere = postgres({ host: "127.0.0.1", port: closedPort, max: 1, connect_timeout: 2 });
  t.equal(unavailableDependency(await failure(() => nowhere`select 1`)), "network", "ECONNREFUSED");
  await nowhere.end();

  const bus = await connectBus({
    servers: TEST_NATS_URL,
    name: "notify-test-classifier",
    namespace: "tclassify",
    partitions: 1,
  });
  t.equal(
    unavailableDependency(await failure(() => bus.nc.request("notify.nobody.listens", undefined, { timeout: 1000 }))),
    "nats",
    "no responders",
  );
  const silent = bus.nc.subscribe("notify.test.silent");
  t.equal(
    unavailableDependency(await failure(() => bus.nc.request("notify.test.silent", undefined, { timeout: 50 }))),
    "nats",
    "a request timed out",
  );
  silent.unsubscribe();
  t.equal(unavailableDependency(await failure(() => bus.jsm.streams.info("NO_SUCH_STREAM"))), null, "stream not found");
  await bus.close();
  t.equal(unavailableDependency(await failure(() => bus.nc.request("x"))), "nats", "the connection is closed");
});
