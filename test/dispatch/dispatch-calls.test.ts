import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquire } from '../../src/dispatch/acquire.js';
import { createPool, type Pool } from '../../src/store/pool.js';
import { poolLimitSet } from '../../src/store/pools.js';
import { mapRunner } from '../../src/store/runners.js';
import { testDispatchDeps } from '../support/lifecycle.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { seedRun } from '../support/seed.js';

describe('a dispatch tick over several acquire calls of one runner', () => {
  const db = useTestDatabase();
  let pool: Pool;
  beforeAll(() => {
    pool = createPool(db.current.url, { max: 4 });
  });
  afterAll(() => pool.end());

  it('hands each offer to the call it was planned on, over pages, and leaves no pool hold without a lease', async () => {
    await pool.query(`INSERT INTO runners (id, name, max_load, max_parallel_steps, credential_hash) VALUES ('rnr_calls', 'calls', 10, 10, 'hash-calls')`);
    const runner = mapRunner((await pool.query(`SELECT * FROM runners WHERE id = 'rnr_calls'`)).rows[0]);
    await poolLimitSet(pool, { name: 'full', limit: 0 });
    await poolLimitSet(pool, { name: 'db', limit: 5 });
    // Queue order: a step no pool admits, a free step, a pooled step.
    const blocked = await seedRun(pool, { steps: [{ name: 'blocked', pools: ['full'] }] });
    const free = await seedRun(pool, { steps: [{ name: 'free' }] });
    const pooled = await seedRun(pool, { steps: [{ name: 'pooled', pools: ['db'] }] });
    const deps = testDispatchDeps(pool, { replicaId: 'replica-calls', acceptExceeding: true });
    // Two calls of the runner, one slot each; the first only takes another run's work.
    const restricted = acquire(deps, { runner, requestId: 'only-other', maxOffers: 1, waitMs: 30_000, onlyRunId: 999_999 });
    await waitFor(() => deps.registry.size === 1, { intervalMs: 5 });
    const open = acquire(deps, { runner, requestId: 'any', maxOffers: 1, waitMs: 30_000, onlyRunId: null });
    await waitFor(() => deps.registry.size === 2, { intervalMs: 5 });
    const tick = await deps.tick();
    deps.registry.drainAll();
    const [a, b] = await Promise.all([restricted, open]);
    expect(a).toEqual([]);
    expect(b.map((o) => o.step_id)).toEqual([free.stepIds[0]]);
    expect(tick.delivered).toBe(1);
    const { rows: holds } = await pool.query(`SELECT step_id FROM pool_holds`);
    expect(holds).toEqual([]);
    const { rows: queued } = await pool.query(`SELECT step_id FROM queue_ready ORDER BY step_id`);
    expect(queued.map((r) => Number(r.step_id))).toEqual([blocked.stepIds[0], pooled.stepIds[0]]);
  });
});
