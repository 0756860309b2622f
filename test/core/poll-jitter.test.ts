import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jitteredPollMs, POLL_JITTER_FRACTION, POLL_JITTER_MIN_MS } from '../../src/core/poll-jitter.js';

describe('jittered long-poll waits', () => {
  it('a long wait is shortened by at most a fifth, never lengthened, never below the jitter floor', () => {
    fc.assert(
      fc.property(fc.integer({ min: POLL_JITTER_MIN_MS, max: 3_600_000 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (wait, r) => {
        const got = jitteredPollMs(wait, () => r);
        expect(got).toBeLessThanOrEqual(wait);
        expect(got).toBeGreaterThanOrEqual(Math.max(POLL_JITTER_MIN_MS, Math.floor(wait * (1 - POLL_JITTER_FRACTION))));
      }),
    );
  });

  it('a short wait is kept exact', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: POLL_JITTER_MIN_MS - 1 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (wait, r) => {
        expect(jitteredPollMs(wait, () => r)).toBe(wait);
      }),
    );
  });

  it('the default 50 s window spreads 10,000 parked runners over 40–50 s, no second holding much more than its share', () => {
    let seed = 7;
    // A small deterministic generator (LCG), so the spread asserted is the same every run.
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    const perSecond = new Map<number, number>();
    for (let i = 0; i < 10_000; i++) {
      const s = Math.floor(jitteredPollMs(50_000, random) / 1000);
      perSecond.set(s, (perSecond.get(s) ?? 0) + 1);
    }
    expect(Math.min(...perSecond.keys())).toBe(40);
    expect(Math.max(...perSecond.keys())).toBeLessThanOrEqual(50);
    // 10 seconds share them: about 1,000 a second rather than 10,000 in one instant.
    expect(Math.max(...perSecond.values())).toBeLessThan(1_300);
  });
});
