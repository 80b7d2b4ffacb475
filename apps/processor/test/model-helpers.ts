import type { Bus } from "@notify/bus";
import type { Database } from "@notify/db";

/** What a processor killed inside a transaction answers its caller (if the connection's error does not first). */
export class Killed extends Error {
  constructor() {
    super("killed inside its transaction");
  }
}

type Begin = (...args: unknown[]) => Promise<unknown>;
type Tx = ((...args: unknown[]) => unknown) & Record<string, unknown>;

/**
 * A database handle of a processor that dies inside its next transactions: when the callback
 * awaits its `killAt`-th statement (counted from 0; a fragment built but never awaited counts and
 * kills nothing), or else when the callback is done and the transaction would commit, the
 * transaction's own backend is ended (pg_terminate_backend), as a processor's SIGKILL ends its
 * connection: Postgres rolls back what the transaction did, and what the callback did outside
 * it (a publish) stays done. Statements outside a transaction pass through.
 */
export function dyingDatabase(database: Database, killAt: number): Database {
  const sql = new Proxy(database.sql, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (property !== "begin") return value;
      return (...args: unknown[]) => {
        const callback = args.pop() as (tx: Tx) => Promise<unknown>;
        return (value as Begin).apply(target, [
          ...args,
          async (tx: Tx) => {
            const kill = async (): Promise<never> => {
              await (tx as unknown as (
                s: TemplateStringsArray,
              ) => Promise<unknown>)`select pg_terminate_backend(pg_backend_pid())`.catch(() => undefined);
              throw new Killed();
            };
            let statements = 0;
            const dying = new Proxy(tx, {
              apply(fn, self, call) {
                const query = Reflect.apply(fn, self, call) as { then?: unknown };
                const tagged = Array.isArray(call[0]) && "raw" in (call[0] as object);
                if (tagged && statements++ === killAt && query && typeof query.then === "function") {
                  // The statement is never sent: the connection ends where it would have been.
                  // biome-ignore lint/suspicious/noThenProperty: awaiting the statement is what kills
                  Object.defineProperty(query, "then", {
                    value: (ok: (v: never) => unknown, failed: (e: unknown) => unknown) => kill().then(ok, failed),
                  });
                }
                return query;
              },
            });
            await callback(dying);
            return kill();
          },
        ]);
      };
    },
  });
  return { ...database, sql };
}

/** A bus of a processor that dies before its publishes reach NATS: every publish fails. */
export const losingBus = (bus: Bus): Bus => ({
  ...bus,
  publish: async () => {
    throw new Error("publish lost with its processor");
  },
});

/** The messages a stream stores from now on, read a batch at a time, in stream order. */
export async function streamTail<T>(bus: Bus, stream: string) {
  let next = (await bus.jsm.streams.info(stream)).state.last_seq + 1;
  return async (): Promise<Array<{ subject: string; data: T }>> => {
    const last = (await bus.jsm.streams.info(stream)).state.last_seq;
    const read: Array<{ subject: string; data: T }> = [];
    for (; next <= last; next++) {
      const message = await bus.jsm.streams.getMessage(stream, { seq: next }).catch(() => null);
      if (message) read.push({ subject: message.subject, data: message.json<T>() });
    }
    return read;
  };
}

/** Settles every promise; the outcomes in order (a processor's crash is an outcome, not a test failure). */
export async function outcomes<T>(work: ReadonlyArray<Promise<T>>): Promise<Array<{ ok: T } | { failed: unknown }>> {
  return (await Promise.allSettled(work)).map((r) =>
    r.status === "fulfilled" ? { ok: r.value } : { failed: r.reason },
  );
}
