import { describe, expect, it } from 'vitest';
import { CallGroups } from '../../src/core/call-groups.js';

interface Call { id: string; weight: number; resolve: (group: string[]) => void; reject: (err: unknown) => void }

/** A CallGroups whose groups are recorded; `gate` holds every group until it is opened. */
function harness(opts: { maxCalls?: number; maxInFlight?: number; maxWeight?: number; refuse?: (ids: string[]) => boolean } = {}) {
  const groups: string[][] = [];
  let inFlight = 0;
  let maxSeen = 0;
  let open: () => void = () => {};
  let gate = new Promise<void>((r) => (open = r));
  const g = new CallGroups<Call>({
    maxCalls: opts.maxCalls ?? 100,
    maxInFlight: opts.maxInFlight ?? 1,
    weight: opts.maxWeight === undefined ? undefined : (c) => c.weight,
    maxWeight: opts.maxWeight,
    apply: async (calls) => {
      const ids = calls.map((c) => c.id);
      groups.push(ids);
      inFlight++;
      maxSeen = Math.max(maxSeen, inFlight);
      try {
        await gate;
        if (opts.refuse?.(ids)) throw new Error(`refused ${ids.join(',')}`);
        for (const c of calls) c.resolve(ids);
      } finally {
        inFlight--;
      }
    },
    fail: (c, err) => c.reject(err),
  });
  const call = (id: string, weight = 1) => new Promise<string[]>((resolve, reject) => g.push({ id, weight, resolve, reject }));
  return {
    groups,
    call,
    maxInFlight: () => maxSeen,
    release: () => {
      open();
      gate = Promise.resolve();
    },
  };
}

describe('CallGroups', () => {
  it('groups the calls of one turn, and those that arrive while a group is in flight form the next', async () => {
    const h = harness();
    const first = [h.call('a'), h.call('b')];
    await new Promise((r) => setImmediate(r));
    expect(h.groups).toEqual([['a', 'b']]);
    const later = [h.call('c'), h.call('d'), h.call('e')];
    await new Promise((r) => setImmediate(r));
    // One group in flight at most: c, d and e wait for it.
    expect(h.groups).toHaveLength(1);
    h.release();
    expect(await Promise.all([...first, ...later])).toEqual([['a', 'b'], ['a', 'b'], ['c', 'd', 'e'], ['c', 'd', 'e'], ['c', 'd', 'e']]);
    expect(h.maxInFlight()).toBe(1);
  });

  it('bounds a group by its calls and by their weight; a call heavier than the bound goes alone', async () => {
    const h = harness({ maxCalls: 3, maxInFlight: 2, maxWeight: 10 });
    h.release();
    await Promise.all([h.call('a', 4), h.call('b', 4), h.call('c', 4), h.call('big', 50), h.call('d', 1), h.call('e', 1), h.call('f', 1), h.call('g', 1)]);
    expect(h.groups).toEqual([['a', 'b'], ['c'], ['big'], ['d', 'e', 'f'], ['g']]);
    expect(h.maxInFlight()).toBeLessThanOrEqual(2);
  });

  it('applies a refused group again call by call, so only the call that fails by itself fails', async () => {
    const h = harness({ refuse: (ids) => ids.includes('bad') });
    h.release();
    const results = await Promise.allSettled([h.call('a'), h.call('bad'), h.call('b')]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason.message).toBe('refused bad');
    expect(h.groups).toEqual([['a', 'bad', 'b'], ['a'], ['bad'], ['b']]);
    // The next group forms as usual.
    expect(await h.call('c')).toEqual(['c']);
  });
});
