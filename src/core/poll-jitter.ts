/** Long polls at least this long are jittered; shorter ones (tests, a runner polling fast) are kept exact. */
export const POLL_JITTER_MIN_MS = 10_000;
/** The most a long poll's wait is shortened by, as a fraction of it. */
export const POLL_JITTER_FRACTION = 0.2;

/**
 * The wait of one long poll: shortened at random by up to POLL_JITTER_FRACTION, never lengthened
 * (the runner's own timeout is its wait plus a margin). Runners that parked together (a fleet
 * started at once, a replica restarted) would otherwise all be answered empty in the same
 * instant, every window, and re-poll in one burst; spread over a fifth of the window they arrive
 * as a steady trickle. `random` in [0, 1).
 */
export function jitteredPollMs(waitMs: number, random: () => number): number {
  if (waitMs < POLL_JITTER_MIN_MS) return waitMs;
  return Math.max(POLL_JITTER_MIN_MS, Math.round(waitMs * (1 - POLL_JITTER_FRACTION * random())));
}
