import { describe, expect, it } from 'vitest';
import type { Clock } from '../../src/clock.js';
import type { OutstandingLease } from '../../src/ops/domain/drain.js';
import { drainWait, DrainWaitTimeout } from '../../src/ops/drain-wait.js';

/** A clock that moves only when the loop sleeps: each pass of the wait is one tick. */
function fakeClock(): Clock & { slept: number[] } {
  let now = 0;
  const slept: number[] = [];
  return {
    slept,
    now: () => now,
    sleep: async (ms) => {
      slept.push(ms);
      now += ms;
    },
  };
}

const lease = (stepId: number): OutstandingLease => ({ stepId, runId: 1, step: `s${stepId}`, run: 'r', attempt: 1, runner: 'build-7', executing: true, deliveredAt: null });

describe('drainWait, tick by tick', () => {
  it('returns once nothing is held, telling each change and every lease it waited for', async () => {
    const reads = [[lease(1), lease(2)], [lease(1), lease(2)], [lease(2)], [lease(2), lease(3)], []];
    const changes: Array<[number[], number[]]> = [];
    const clock = fakeClock();
    const r = await drainWait(async () => reads.shift()!, {
      timeoutMs: 60_000,
      clock,
      pollMs: 500,
      onChange: (still, finished) => changes.push([still.map((l) => l.stepId), finished.map((l) => l.stepId)]),
    });
    expect(changes).toEqual([
      [[1, 2], []],
      [[2], [1]],
      [[2, 3], []],
      [[], [2, 3]],
    ]);
    expect(r.waitedFor.map((l) => l.stepId)).toEqual([1, 2, 3]);
    expect(r.waitedMs).toBe(2_000);
    expect(clock.slept).toEqual([500, 500, 500, 500]);
  });

  it('answers at once when nothing was held', async () => {
    const clock = fakeClock();
    expect(await drainWait(async () => [], { timeoutMs: 1_000, clock })).toEqual({ waitedFor: [], waitedMs: 0 });
    expect(clock.slept).toEqual([]);
  });

  it('gives up at the timeout with what is still out, never sleeping past it', async () => {
    const clock = fakeClock();
    const err = await drainWait(async () => [lease(9)], { timeoutMs: 1_200, clock, pollMs: 500 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DrainWaitTimeout);
    expect((err as DrainWaitTimeout).remaining.map((l) => l.stepId)).toEqual([9]);
    expect((err as DrainWaitTimeout).kind).toBe('timed_out');
    expect(clock.slept).toEqual([500, 500, 200]);
    expect((err as Error).message).toBe('timed out after 1s: 1 lease still out (run 1 (r) step s9 attempt 1 on build-7)');
  });
});
