import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SHARD_COUNT } from '../../src/core/entry.js';
import { rendezvousWeight, shardAssignment, shardOwner, shardSpread, shardsOf } from '../../src/core/rendezvous.js';

/** Replica ids shaped like the real ones: hostname-<6 hex>. */
const replicaId = fc
  .tuple(fc.constantFrom('web', 'ops', 'ip-10-0-0-1', 'node'), fc.stringMatching(/^[0-9a-f]{6}$/))
  .map(([host, suffix]) => `${host}-${suffix}`);
const membership = fc.uniqueArray(replicaId, { minLength: 1, maxLength: 16 });

describe('rendezvous shard assignment', () => {
  it('gives every shard exactly one owner, drawn from the live set', () => {
    fc.assert(
      fc.property(membership, (ids) => {
        const owners = shardAssignment(ids);
        expect(owners).toHaveLength(SHARD_COUNT);
        for (const o of owners) expect(ids).toContain(o);
        const perReplica = ids.flatMap((id) => shardsOf(id, ids));
        expect(perReplica.sort((a, b) => a - b)).toEqual(Array.from({ length: SHARD_COUNT }, (_, i) => i));
      }),
    );
  });

  it('does not depend on the order in which membership is listed', () => {
    fc.assert(
      fc.property(membership, fc.infiniteStream(fc.nat()), (ids, seeds) => {
        const shuffled = [...ids].sort(() => (seeds.next().value % 3) - 1);
        expect(shardAssignment(shuffled)).toEqual(shardAssignment(ids));
      }),
    );
  });

  it('a departure moves only the departed replica\'s shards', () => {
    fc.assert(
      fc.property(fc.uniqueArray(replicaId, { minLength: 2, maxLength: 16 }), fc.nat(), (ids, k) => {
        const gone = ids[k % ids.length];
        const before = shardAssignment(ids);
        const after = shardAssignment(ids.filter((id) => id !== gone));
        for (let s = 0; s < SHARD_COUNT; s++) {
          if (before[s] !== gone) expect(after[s]).toBe(before[s]);
          else expect(after[s]).not.toBe(gone);
        }
      }),
    );
  });

  it('a join moves shards only to the newcomer', () => {
    fc.assert(
      fc.property(membership, replicaId, (ids, newcomer) => {
        fc.pre(!ids.includes(newcomer));
        const before = shardAssignment(ids);
        const after = shardAssignment([...ids, newcomer]);
        for (let s = 0; s < SHARD_COUNT; s++) {
          if (after[s] !== before[s]) expect(after[s]).toBe(newcomer);
        }
      }),
    );
  });

  it('no replicas: no owner; one replica: every shard', () => {
    expect(shardOwner([], 3)).toBeUndefined();
    expect(shardsOf('a-000000', [])).toEqual([]);
    expect(shardsOf('a-000000', ['a-000000'])).toHaveLength(SHARD_COUNT);
    expect(shardsOf('b-000000', ['a-000000'])).toEqual([]);
  });

  it('weights are stable numbers below 2^53 and differ across shards', () => {
    const ws = Array.from({ length: SHARD_COUNT }, (_, s) => rendezvousWeight('web-0a1b2c', s));
    for (const w of ws) expect(Number.isSafeInteger(w) && w >= 0).toBe(true);
    expect(new Set(ws).size).toBe(SHARD_COUNT);
    expect(rendezvousWeight('web-0a1b2c', 5)).toBe(ws[5]);
  });

  it('spreads shards reasonably: no replica of a realistic fleet owns nothing or more than three fair shares', () => {
    fc.assert(
      fc.property(fc.uniqueArray(replicaId, { minLength: 2, maxLength: 8 }), (ids) => {
        const s = shardSpread(ids);
        expect(s.min + s.max).toBeGreaterThan(0);
        expect(s.max).toBeLessThanOrEqual(Math.ceil((3 * SHARD_COUNT) / ids.length));
      }),
    );
  });
});
