import { describe, expect, it } from 'vitest';
import { UNBLOCK_EVERY_MS, UNBLOCK_NUDGED_MS, UnblockCadence } from '../../src/dispatch/blocked.js';

describe('when a replica checks its blocked entries again', () => {
  it('at once at start, then every interval; a lease ended here brings the next check forward, once', () => {
    const c = new UnblockCadence();
    expect(c.dueIn(10_000)).toBe(0);
    c.ran(10_000);
    expect(c.dueIn(10_000)).toBe(UNBLOCK_EVERY_MS);
    expect(c.dueIn(10_600)).toBe(UNBLOCK_EVERY_MS - 600);
    c.nudge();
    expect(c.dueIn(10_100)).toBe(UNBLOCK_NUDGED_MS - 100);
    expect(c.dueIn(10_400)).toBe(0);
    c.ran(10_400);
    // The nudge is spent by the check it caused.
    expect(c.dueIn(10_400)).toBe(UNBLOCK_EVERY_MS);
  });
});
