import { describe, expect, it } from 'vitest';
import { UNBLOCK_EVERY_MS, UNBLOCK_NUDGED_MS, UnblockCadence } from '../../src/dispatch/blocked.js';

describe('when a replica checks its blocked entries again', () => {
  it('every entry at start and then every interval', () => {
    const c = new UnblockCadence();
    expect(c.next(10_000)).toEqual({ inMs: 0 });
    expect(c.next(10_000)).toEqual({ inMs: UNBLOCK_EVERY_MS });
    expect(c.next(10_600)).toEqual({ inMs: UNBLOCK_EVERY_MS - 600 });
    expect(c.next(10_000 + UNBLOCK_EVERY_MS)).toEqual({ inMs: 0 });
  });

  it('what ended leases freed is checked by key, once, between the full checks; a full check due takes it in', () => {
    const c = new UnblockCadence();
    c.next(10_000);
    c.nudge([], 10_100);
    expect(c.next(10_100)).toEqual({ inMs: UNBLOCK_EVERY_MS - 100 });
    c.nudge(['run:7', 'pool:db'], 10_100);
    c.nudge(['run:7'], 10_150);
    expect(c.next(10_100 + UNBLOCK_NUDGED_MS)).toEqual({ inMs: 0, keys: ['run:7', 'pool:db'] });
    expect(c.next(10_200)).toEqual({ inMs: UNBLOCK_EVERY_MS - 200 });
    c.nudge(['run:8'], 10_000 + UNBLOCK_EVERY_MS);
    expect(c.next(10_000 + UNBLOCK_EVERY_MS)).toEqual({ inMs: 0 });
    expect(c.next(10_000 + UNBLOCK_EVERY_MS)).toEqual({ inMs: UNBLOCK_EVERY_MS });
  });
});
