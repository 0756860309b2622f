import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { QueueEntry } from '../../src/core/entry.js';
import { DispatchOrder, dispatchOrder, FairShare, STRIDE_UNIT } from '../../src/core/stride.js';
import { entry } from './arbitraries.js';

/** Every key permanently backlogged: pick the next key by the real order over one head per key. */
function simulate(weights: Record<string, number>, deliveries: number, fair = new FairShare()): Map<string, number> {
  const counts = new Map<string, number>(Object.keys(weights).map((k) => [k, 0]));
  for (let i = 0; i < deliveries; i++) {
    const heads = Object.entries(weights).map(([k, w], j) => entry({ fairKey: k, weight: w, position: j }));
    const next = new DispatchOrder(heads, fair).next()!;
    fair.charge(next.lane, next.fairKey, next.weight);
    counts.set(next.fairKey, counts.get(next.fairKey)! + 1);
  }
  return counts;
}

describe('stride fair-share', () => {
  it('shares converge to the weight ratio within 2% over 10,000 deliveries', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.constantFrom('a', 'b', 'c', 'd', 'e'), { minLength: 2, maxLength: 5 }), fc.array(fc.integer({ min: 1, max: 10 }), { minLength: 5, maxLength: 5 }), (keys, ws) => {
        const weights = Object.fromEntries(keys.map((k, i) => [k, ws[i]]));
        const total = keys.reduce((s, k) => s + weights[k], 0);
        const counts = simulate(weights, 10_000);
        for (const k of keys) {
          const expected = (10_000 * weights[k]) / total;
          expect(Math.abs(counts.get(k)! - expected) / expected).toBeLessThanOrEqual(0.02);
        }
      }),
      { numRuns: 25 },
    );
  });

  it('fractional weights converge too', () => {
    const counts = simulate({ heavy: 2.5, light: 0.5 }, 10_000);
    expect(counts.get('heavy')! / 10_000).toBeCloseTo(2.5 / 3, 2);
  });

  it('a newcomer is served within one round of the established keys', () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 6 }), fc.integer({ min: 0, max: 500 }), fc.array(fc.integer({ min: 1, max: 8 }), { minLength: 6, maxLength: 6 }), (n, warmup, ws) => {
        const fair = new FairShare();
        const weights = Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, ws[i]]));
        simulate(weights, warmup, fair);
        // The newcomer's backlog is older than everyone's (lowest positions): only its pass can hold it back.
        const withNew = { ...weights, newcomer: 1 };
        const served: string[] = [];
        for (let i = 0; i < n + 1; i++) {
          const heads = Object.entries(withNew).map(([k, w], j) => entry({ fairKey: k, weight: w, position: k === 'newcomer' ? 1_000 + i : j }));
          const next = new DispatchOrder(heads, fair).next()!;
          fair.charge(next.lane, next.fairKey, next.weight);
          served.push(next.fairKey);
          if (next.fairKey === 'newcomer') break;
        }
        expect(served).toContain('newcomer');
        // Nobody else was served twice before it.
        const before = served.slice(0, served.indexOf('newcomer'));
        expect(new Set(before).size).toBe(before.length);
      }),
      { numRuns: 100 },
    );
  });

  it('a key idle for a long time comes back at the current minimum, not with a backlog of credit', () => {
    const fair = new FairShare();
    simulate({ early: 1 }, 5, fair);
    simulate({ a: 1, b: 1 }, 1_000, fair);
    const counts = simulate({ early: 1, a: 1, b: 1 }, 30, fair);
    expect(counts.get('early')).toBeLessThanOrEqual(11);
    expect(counts.get('a')).toBeGreaterThanOrEqual(9);
  });

  it('advances a pass by 2^20 / weight per delivery', () => {
    const fair = new FairShare();
    fair.charge(2, 'a', 4);
    expect(fair.passOf(2, 'a')).toBe(STRIDE_UNIT / 4);
    fair.charge(2, 'a', 4);
    expect(fair.passOf(2, 'a')).toBe(STRIDE_UNIT / 2);
    // A first-seen key joins at the lane's current minimum (the floor), in its own lane only.
    expect(fair.passOf(2, 'new')).toBe(STRIDE_UNIT / 4);
    expect(fair.passOf(0, 'a')).toBe(0);
  });

  it('keeps FIFO within a key and never inverts lanes', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ priority: fc.constantFrom(0, 10, 60, 120, 199), key: fc.constantFrom('a', 'b', 'c'), weight: fc.constantFrom(1, 2, 5), position: fc.integer({ min: 0, max: 1000 }) }), { maxLength: 40 }),
        (specs) => {
          const claims = specs.map((s, i) => entry({ priority: s.priority, fairKey: s.key, weight: s.weight, position: s.position * 100 + i }));
          const order = dispatchOrder(claims, new FairShare());
          expect(order).toHaveLength(claims.length);
          for (let i = 1; i < order.length; i++) expect(order[i].lane).toBeGreaterThanOrEqual(order[i - 1].lane);
          const seen = new Map<string, QueueEntry>();
          for (const e of order) {
            const prev = seen.get(`${e.lane}/${e.fairKey}`);
            if (prev) expect(e.position).toBeGreaterThan(prev.position);
            seen.set(`${e.lane}/${e.fairKey}`, e);
          }
        },
      ),
    );
  });

  it('interleaves a flooding key with a trickle instead of plain FIFO', () => {
    const flood = Array.from({ length: 10 }, (_, i) => entry({ fairKey: 'flood', position: i }));
    const trickle = [entry({ fairKey: 'trickle', position: 100 }), entry({ fairKey: 'trickle', position: 101 })];
    const order = dispatchOrder([...flood, ...trickle], new FairShare()).map((e) => e.fairKey);
    expect(order.slice(0, 4)).toEqual(['flood', 'trickle', 'flood', 'trickle']);
  });

  it('a plan charges a copy: the dispatcher state moves only when told', () => {
    const fair = new FairShare();
    const copy = fair.clone();
    copy.charge(2, 'a', 1);
    expect(fair.passOf(2, 'a')).toBe(0);
    fair.chargeAll([{ lane: 2, fairKey: 'a', weight: 1 }]);
    expect(fair.passOf(2, 'a')).toBe(STRIDE_UNIT);
  });
});
