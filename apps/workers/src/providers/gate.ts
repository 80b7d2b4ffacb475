import type { KV } from "@notify/bus";
import {
  type AddressResult,
  classifyAnswer,
  countsAgainstProvider,
  type ProviderAnswer,
  type RateLimit,
  splitRate,
  withDeadline,
} from "@notify/core";
import type { Logger } from "@notify/log";
import type { OutboundMessage, Provider } from "@notify/providers";
import type { DeliveryMetrics } from "../metrics.js";
import {
  type BreakerSettings,
  type BreakerStateName,
  createBreaker,
  type ProviderBreaker,
  REJECTED,
} from "./breaker.js";
import { createRateLimiter, type RateLimiter } from "./rate-limiter.js";
import { type SharedBreaker, shareBreakerState } from "./shared-breaker.js";

/** A provider with what guards it: its circuit breaker, its shared token buckets, a deadline. */
export interface ProviderGate {
  readonly provider: Provider;
  readonly breaker: ProviderBreaker;
  readonly limiter: RateLimiter;
  /** One provider call through the breaker, classified; it never throws for the provider's sake. */
  send(message: OutboundMessage): Promise<AddressResult>;
  close(): void;
}

export function createGate(
  provider: Provider,
  options: {
    breaker: ProviderBreaker;
    limiter: RateLimiter;
    deadlineMs: number;
    metrics: DeliveryMetrics;
    shared?: SharedBreaker;
  },
): ProviderGate {
  const { breaker, limiter, metrics } = options;
  const call = async (message: OutboundMessage): Promise<ProviderAnswer> => {
    try {
      // Bounds a call whatever the provider does: one with no deadline of its own must not hold
      // a pool slot and a send guard forever.
      return await withDeadline(provider.send(message), options.deadlineMs, {
        outcome: "transient",
        reason: `${provider.name} gave no answer within ${options.deadlineMs} ms`,
      } as ProviderAnswer);
    } catch (error) {
      // A provider that throws instead of classifying: the request may have left, so the
      // outcome is unknown, like a timeout.
      return { outcome: "transient", reason: `${provider.name} failed unexpectedly: ${String(error)}` };
    }
  };
  return {
    provider,
    breaker,
    limiter,
    async send(message) {
      const started = performance.now();
      const result = await breaker.run(() => call(message), countsAgainstProvider);
      if (result === REJECTED) return { kind: "skipped", reason: `${provider.name} circuit breaker is open` };
      metrics.sendSeconds.observe({ provider: provider.name }, (performance.now() - started) / 1000);
      const classified = classifyAnswer(result, provider.idempotent === true);
      metrics.sends.inc({ provider: provider.name, channel: provider.channel, result: classified.kind });
      return classified;
    },
    close() {
      limiter.close();
      void options.shared?.stop();
      breaker.dispose();
    },
  };
}

export interface GateSettings {
  /** Contractual rates by provider name; others get `defaultRate`. */
  rateLimits: Record<string, RateLimit>;
  defaultRate: RateLimit;
  transactionalReservedPercent: number;
  breaker: BreakerSettings;
  deadlineMs: number;
}

const BREAKER_STATES: readonly BreakerStateName[] = ["closed", "half_open", "open"];

/** Closes gates (their buckets, breakers) and then their providers (an SMTP pool, say). */
export async function closeGates(gates: readonly ProviderGate[]): Promise<void> {
  for (const gate of gates) gate.close();
  await Promise.all(gates.map((gate) => gate.provider.close?.()));
}

/** One gate per configured provider; a channel has a pool only when its provider is here. */
export function createGates(
  providers: readonly Provider[],
  deps: {
    rateKv: KV;
    /** notify_breakers: each breaker's decisions shared with the other worker processes. */
    breakerKv?: KV;
    /** This process, as the other workers see it (host:pid). */
    worker?: string;
    metrics: DeliveryMetrics;
    log: Logger;
    settings: GateSettings;
  },
): ProviderGate[] {
  const channels = new Set<string>();
  return providers.map((provider) => {
    if (channels.has(provider.channel)) throw new Error(`two providers for the ${provider.channel} channel`);
    channels.add(provider.channel);
    const { metrics, settings } = deps;
    const log = deps.log.child({ provider: provider.name });
    const showState = (state: BreakerStateName) => {
      for (const s of BREAKER_STATES)
        metrics.breakerState.set({ provider: provider.name, state: s }, s === state ? 1 : 0);
    };
    showState("closed");
    let shared: SharedBreaker | undefined;
    const breaker = createBreaker(provider.name, settings.breaker, (state) => {
      shared?.onLocalChange(state);
      showState(state);
      metrics.breakerTransitions.inc({ provider: provider.name, state });
      if (state === "open")
        log.warn({ breaker: state, open_ms: settings.breaker.openMs }, "provider breaker opened; parking its work");
      else
        log.info(
          { breaker: state },
          state === "closed" ? "provider breaker closed" : "provider breaker half-open; probing",
        );
    });
    const limit = settings.rateLimits[provider.name] ?? settings.defaultRate;
    const limiter = createRateLimiter({
      kv: deps.rateKv,
      key: provider.name,
      rates: splitRate(limit, settings.transactionalReservedPercent),
      log,
    });
    if (deps.breakerKv)
      shared = shareBreakerState({
        kv: deps.breakerKv,
        breaker,
        worker: deps.worker ?? `${process.pid}`,
        log,
        openMs: settings.breaker.openMs,
      });
    return createGate(provider, {
      breaker,
      limiter,
      deadlineMs: settings.deadlineMs,
      metrics,
      ...(shared ? { shared } : {}),
    });
  });
}
