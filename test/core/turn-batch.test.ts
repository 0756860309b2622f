import { describe, expect, it } from 'vitest';
import { turnBatcher } from '../../src/core/turn-batch.js';

describe('turnBatcher', () => {
  it('answers the lookups of one turn with one load, shares a key, and reads afresh on the next turn', async () => {
    const loads: string[][] = [];
    let version = 1;
    const lookup = turnBatcher(async (keys: string[]) => {
      loads.push(keys);
      return new Map(keys.filter((k) => k !== 'missing').map((k) => [k, `${k}@${version}`]));
    });
    const first = await Promise.all([lookup('a'), lookup('b'), lookup('a'), lookup('missing')]);
    expect(first).toEqual(['a@1', 'b@1', 'a@1', undefined]);
    expect(loads).toEqual([['a', 'b', 'missing']]);
    version = 2;
    expect(await lookup('a')).toBe('a@2');
    expect(loads).toHaveLength(2);
  });

  it('fails every lookup a failed load carried, and the next turn loads again', async () => {
    let fail = true;
    const lookup = turnBatcher(async (keys: number[]) => {
      if (fail) throw new Error('store unavailable');
      return new Map(keys.map((k) => [k, k * 2]));
    });
    const results = await Promise.allSettled([lookup(1), lookup(2)]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    fail = false;
    expect(await lookup(3)).toBe(6);
  });

  it('splits more than 1000 keys over several loads', async () => {
    const sizes: number[] = [];
    const lookup = turnBatcher(async (keys: number[]) => {
      sizes.push(keys.length);
      return new Map(keys.map((k) => [k, k]));
    });
    const keys = Array.from({ length: 2500 }, (_, i) => i);
    expect(await Promise.all(keys.map((k) => lookup(k)))).toEqual(keys);
    expect(sizes).toEqual([1000, 1000, 500]);
  });
});
