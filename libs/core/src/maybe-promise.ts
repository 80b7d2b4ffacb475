/**
 * A value now, or later. The request path's lookups answer from memory on a hit and go to a
 * database only on a miss; a hit returned as a plain value spares every request on ingest's hot
 * path a promise and a microtask per lookup.
 */
export type MaybePromise<T> = T | Promise<T>;

/** `then` for a MaybePromise: runs `next` at once on a plain value, after it on a promise. */
export const andThen = <T, R>(value: MaybePromise<T>, next: (value: T) => MaybePromise<R>): MaybePromise<R> =>
  value instanceof Promise ? value.then(next) : next(value);
