import type { Priority } from "./channels.js";

/**
 * Outbound rate shaping: a token bucket per provider in front of the worker
 * pools. The bucket is kept as GCRA: its whole state is one number, the theoretical arrival
 * time (`tat`, epoch ms) of the next send, so several worker processes can share it through a
 * compare-and-set store. Equivalent to a token bucket of `burst` tokens refilled at
 * `perSecond`: after an idle spell `burst` sends go at once, then one per interval.
 */
export interface RateLimit {
  /** Sustained sends per second (may be fractional: 0.5 is one every two seconds). */
  perSecond: number;
  /** Sends allowed at once after an idle spell: the bucket's size (>= 1). */
  burst: number;
}

export interface Take {
  granted: number;
  /** The state after the grant. */
  tat: number;
  /** When fewer than wanted were granted: ms until the next token; otherwise 0. */
  retryInMs: number;
}

// Absorbs float error in interval arithmetic (1000 / 3 ms and the like); far below a millisecond.
const EPSILON = 1e-6;

/** Takes up to `wanted` tokens at `now`. A refusal leaves the state as it was. */
export function takeTokens(tat: number, now: number, wanted: number, limit: RateLimit): Take {
  const interval = 1000 / limit.perSecond;
  const tolerance = (limit.burst - 1) * interval;
  const start = Math.max(tat, now);
  const fit = Math.floor((now + tolerance - start) / interval + EPSILON) + 1;
  const granted = Math.max(0, Math.min(Math.floor(wanted), fit));
  const next = start + granted * interval;
  if (granted >= wanted) return { granted, tat: granted > 0 ? next : tat, retryInMs: 0 };
  return { granted, tat: granted > 0 ? next : tat, retryInMs: Math.max(0, next - tolerance - now) };
}

/**
 * A provider's rate split so that transactional traffic keeps a reserved share (invariant 4
 * applied to the provider's rate): the reserved bucket is transactional's alone; the shared one
 * serves promotional traffic and whatever transactional traffic the reserve does not cover. So
 * promotional sends never exceed the shared rate, transactional sends always get at least the
 * reserved rate whatever the promotional backlog, and together they never exceed the limit.
 */
export interface LaneRates {
  /** Null when no share is reserved. */
  reserved: RateLimit | null;
  shared: RateLimit;
}

/** `reservedPercent` of the rate and of the burst go to the reserve (each bucket keeps >= 1 token). */
export function splitRate(limit: RateLimit, reservedPercent: number): LaneRates {
  if (reservedPercent <= 0) return { reserved: null, shared: limit };
  const share = Math.min(reservedPercent, 100) / 100;
  const reservedBurst = Math.max(1, Math.round(limit.burst * share));
  return {
    reserved: { perSecond: limit.perSecond * share, burst: reservedBurst },
    shared: { perSecond: limit.perSecond * (1 - share), burst: Math.max(1, limit.burst - reservedBurst) },
  };
}

/** Both buckets of one provider, stored together so that one compare-and-set updates both. */
export interface LaneBuckets {
  reserved: number;
  shared: number;
}

export type LaneCounts = Record<Priority, number>;

export interface LaneTake {
  granted: LaneCounts;
  state: LaneBuckets;
  /** ms until a token may free up for a lane still waiting; 0 when every request was served. */
  retryInMs: number;
}

/**
 * Serves waiting sends of both lanes at `now`: transactional first, from its reserve and then
 * from the shared bucket; promotional from what the shared bucket has left.
 */
export function takeForLanes(state: LaneBuckets, now: number, wanted: LaneCounts, rates: LaneRates): LaneTake {
  const fromReserve = rates.reserved
    ? takeTokens(state.reserved, now, wanted.transactional, rates.reserved)
    : { granted: 0, tat: state.reserved, retryInMs: Number.POSITIVE_INFINITY };
  const transactionalLeft = wanted.transactional - fromReserve.granted;
  const fromShared = takeTokens(state.shared, now, transactionalLeft + wanted.promotional, rates.shared);
  const transactionalShared = Math.min(transactionalLeft, fromShared.granted);
  const granted = {
    transactional: fromReserve.granted + transactionalShared,
    promotional: fromShared.granted - transactionalShared,
  };
  const waiting = {
    transactional: granted.transactional < wanted.transactional,
    promotional: granted.promotional < wanted.promotional,
  };
  let retryInMs = 0;
  if (waiting.transactional) retryInMs = Math.min(fromReserve.retryInMs, fromShared.retryInMs);
  else if (waiting.promotional) retryInMs = fromShared.retryInMs;
  return { granted, state: { reserved: fromReserve.tat, shared: fromShared.tat }, retryInMs };
}

/**
 * The tokens each lane could take at `now` without waiting: transactional from its reserve and
 * the shared bucket together, promotional from the shared bucket alone (what takeForLanes would
 * grant either lane asked alone). Reads the state only; for an operator's view of a bucket.
 */
export function availableTokens(state: LaneBuckets, now: number, rates: LaneRates): LaneCounts {
  const shared = takeTokens(state.shared, now, rates.shared.burst, rates.shared).granted;
  const reserved = rates.reserved ? takeTokens(state.reserved, now, rates.reserved.burst, rates.reserved).granted : 0;
  return { transactional: reserved + shared, promotional: shared };
}
