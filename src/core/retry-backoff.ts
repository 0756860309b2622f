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

/**
 * The wait before retrying a call the server refused with Retry-After: never sooner than the
 * server asked, plus up to half of it again at random (a fleet refused together must not all come
 * back in the same instant), and never less than the backoff the failure count already earned.
 */
export function retryAfterDelay(retryAfterMs: number, backoffMs: number, random: number): number {
  const r = Math.min(1, Math.max(0, random));
  return Math.max(backoffMs, Math.round(retryAfterMs * (1 + r / 2)));
}

/**
 * A Retry-After header in ms: delay-seconds, or an HTTP date (from `nowMs`); undefined when absent
 * or unreadable. Capped at five minutes, so a broken header cannot park a runner for a day.
 */
export function parseRetryAfterMs(header: string | null | undefined, nowMs: number): number | undefined {
  if (!header) return undefined;
  const text = header.trim();
  // An HTTP date starts with its day name ("Wed, 21 Oct 2015 07:28:00 GMT"); Date.parse alone takes "-1".
  const ms = /^\d+$/.test(text) ? Number(text) * 1000 : /^[A-Za-z]{3}, /.test(text) ? Date.parse(text) - nowMs : NaN;
  if (!Number.isFinite(ms) || ms < 0) return undefined;
  return Math.min(ms, 300_000);
}

/** How often a runner renews a lease: the offer's interval, never more than 60 s or a third of the TTL. */
export function renewIntervalMs(offer: { renew_interval_ms?: number | null; lease_ttl_ms?: number | null }): number {
  const candidates = [60_000];
  if (offer.renew_interval_ms && offer.renew_interval_ms > 0) candidates.push(offer.renew_interval_ms);
  if (offer.lease_ttl_ms && offer.lease_ttl_ms > 0) candidates.push(Math.floor(offer.lease_ttl_ms / 3));
  return Math.max(100, Math.min(...candidates));
}
