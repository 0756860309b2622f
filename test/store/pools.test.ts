import { describe, expect, it } from 'vitest';
import { poolSlotTake, poolSlotsTake, poolSlotsFree, poolLimitList, poolLimitSet, poolLimitUnset, poolStateRead } from '../../src/store/pools.js';
import { withTransaction } from '../../src/store/pool.js';
import { useTestDatabase } from '../support/db.js';

describe('pool store', () => {
  const db = useTestDatabase();

  it('sets, lists with holders, and unsets limits; pools without a limit are unlimited', async () => {
    const pool = db.current.pool;
    await poolLimitSet(pool, { name: 'db', limit: 2 });
    await poolLimitSet(pool, { name: 'db', limit: 3 });
    expect(await withTransaction(pool, (c) => poolSlotTake(c, { stepId: 1, attempt: 1, pools: ['db', 'free'] }))).toBe(true);
    const list = await poolLimitList(pool);
    expect(list.map((p) => [p.name, p.limit, p.holders.map((h) => h.stepId)])).toEqual([
      ['db', 3, [1]],
      ['free', null, [1]],
    ]);
    expect(await poolStateRead(pool, ['db', 'free', 'none'])).toEqual(new Map([['db', { limit: 3, held: 1 }]]));
    expect(await poolLimitUnset(pool, { name: 'db' })).toBe(true);
    expect(await poolLimitUnset(pool, { name: 'db' })).toBe(false);
    expect(await poolSlotsFree(pool, [1])).toBe(2);
    expect(await poolLimitList(pool)).toEqual([]);
  });

  it('takes every hold or none, and a repeated acquire by the same step is not counted twice', async () => {
    const pool = db.current.pool;
    await poolLimitSet(pool, { name: 'x', limit: 1 });
    await poolLimitSet(pool, { name: 'y', limit: 1 });
    const take = (stepId: number, pools: string[]) => withTransaction(pool, (c) => poolSlotTake(c, { stepId, attempt: 1, pools }));
    expect(await take(10, ['y'])).toBe(true);
    expect(await take(11, ['x', 'y'])).toBe(false);
    const { rows } = await pool.query(`SELECT pool FROM pool_holds WHERE step_id = 11`);
    expect(rows).toEqual([]);
    expect(await take(10, ['y'])).toBe(true);
    expect(await poolSlotsFree(pool, [10])).toBe(1);
    expect(await take(11, ['x', 'y'])).toBe(true);
    await poolSlotsFree(pool, [11]);
  });

  it('admits a batch in order, each step all or none, counting the batch\'s own holds', async () => {
    const pool = db.current.pool;
    await poolLimitSet(pool, { name: 'm', limit: 2 });
    await poolLimitSet(pool, { name: 'n', limit: 1 });
    const granted = await withTransaction(pool, (c) =>
      poolSlotsTake(c, [
        { stepId: 20, attempt: 1, pools: ['m'] },
        { stepId: 21, attempt: 1, pools: ['n', 'm'] },
        { stepId: 22, attempt: 1, pools: ['m'] },
        { stepId: 23, attempt: 1, pools: ['n'] },
        { stepId: 24, attempt: 1, pools: ['unlimited'] },
      ]),
    );
    expect([...granted].sort()).toEqual([20, 21, 24]);
    expect(await poolStateRead(pool, ['m', 'n'])).toEqual(new Map([['m', { limit: 2, held: 2 }], ['n', { limit: 1, held: 1 }]]));
    await poolSlotsFree(pool, [20, 21, 24]);
  });

  it('never exceeds a limit under concurrent acquisition from several connections, and never deadlocks', async () => {
    const pool = db.current.pool;
    const limits: Record<string, number> = { pa: 3, pb: 2, pc: 1 };
    for (const [name, limit] of Object.entries(limits)) await poolLimitSet(pool, { name, limit });
    const names = Object.keys(limits);
    const violations: string[] = [];
    let acquired = 0;
    let refused = 0;
    // A deterministic spread of demands: each worker cycles through different pool sets and orders.
    const demand = (w: number, i: number) => {
      const set = names.filter((_, k) => ((w + i) >> k) & 1 || (w * 7 + i) % (k + 2) === 0);
      return (i % 2 ? set.reverse() : set).length ? set : ['pa'];
    };
    const worker = async (w: number) => {
      const client = await pool.connect();
      const mine: number[] = [];
      try {
        for (let i = 0; i < 25; i++) {
          const stepId = 1000 + w * 100 + i;
          await client.query('BEGIN');
          const ok = await poolSlotTake(client, { stepId, attempt: 1, pools: demand(w, i) });
          // Hold the transaction open across another round trip so acquisitions overlap.
          await client.query('SELECT pg_sleep(0.002)');
          await client.query('COMMIT');
          if (ok) {
            acquired++;
            mine.push(stepId);
          } else refused++;
          const { rows } = await client.query(`SELECT h.pool, count(*)::int AS n, l.max_holders FROM pool_holds h JOIN pool_limits l ON l.name = h.pool GROUP BY h.pool, l.max_holders`);
          for (const r of rows) if (r.n > r.max_holders) violations.push(`${r.pool} ${r.n}/${r.max_holders}`);
          if (mine.length && i % 3 === w % 3) await poolSlotsFree(client, [mine.shift()!]);
        }
      } finally {
        await client.query('ROLLBACK').catch(() => {});
        client.release();
      }
    };
    await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map(worker));
    expect(violations).toEqual([]);
    expect(acquired).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
    const final = await poolStateRead(pool, names);
    for (const [name, p] of final) expect(p.held).toBeLessThanOrEqual(limits[name]);
  });
});
