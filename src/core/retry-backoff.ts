export interface BackoffPolicy {
  baseMs: number;
  maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { baseMs: 250, maxMs: 10_000 };

/**
 * Exponential backoff with "equal jitter": the n-th retry (1-based) waits between half and all of
 * min(max, base * 2^(n-1)). Half is kept so a fleet never retries in a tight burst; the random half
 * spreads a fleet that lost its server at the same instant.
 */
export function backoffDelay(retry: number, random: number, policy: BackoffPolicy = DEFAULT_BACKOFF): number {
  const n = Math.max(1, Math.floor(retry));
  const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(n - 1, 30));
  const r = Math.min(1, Math.max(0, random));
  return Math.round(ceiling / 2 + (ceiling / 2) * r);
}

/** How often a runner renews a lease: the offer's interval, never more than 60 s or a third of the TTL. */
export function renewIntervalMs(offer: { renew_interval_ms?: number | null; lease_ttl_ms?: number | null }): number {
  const candidates = [60_000];
  if (offer.renew_interval_ms && offer.renew_interval_ms > 0) candidates.push(offer.renew_interval_ms);
  if (offer.lease_ttl_ms && offer.lease_ttl_ms > 0) candidates.push(Math.floor(offer.lease_ttl_ms / 3));
  return Math.max(100, Math.min(...candidates));
}
