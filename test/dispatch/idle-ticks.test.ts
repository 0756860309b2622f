import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Dispatcher } from '../../src/dispatch/dispatcher.js';
import { createPool, type Pool } from '../../src/store/pool.js';
import { mapRunner, type RunnerRow } from '../../src/store/runners.js';
import { useTestDatabase } from '../support/db.js';
import { testDispatchDeps } from '../support/lifecycle.js';
import { seedRun } from '../support/seed.js';

/** The runner ids each posture-and-parked-runners read of the pool asked for, in order. */
function recordParkedReads(pool: Pool): string[][] {
  const reads: string[][] = [];
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...a: unknown[]) => unknown;
    (client as unknown as { query: (...a: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const q = args[0] as { text?: string; values?: unknown[] };
      if (typeof q === 'object' && q?.text && /fleet_posture/.test(q.text) && /FROM runners r/.test(q.text)) reads.push([...((q.values?.[0] as string[]) ?? [])]);
      return query(...args);
    };
  });
  return reads;
}

describe('ticks on an idle replica', () => {
  const db = useTestDatabase();
  let pool: Pool;
  let reads: string[][];
  let deps: Dispatcher;
  let runners: RunnerRow[];

  beforeAll(async () => {
    pool = createPool(db.current.url, { max: 4 });
    reads = recordParkedReads(pool);
    for (const id of ['rnr_i1', 'rnr_i2', 'rnr_i3']) {
      await db.current.pool.query(`INSERT INTO runners (id, name, max_load, max_parallel_steps, credential_hash) VALUES ($1, $1, 4, 4, $2)`, [id, `hash-${id}`]);
    }
    runners = (await db.current.pool.query(`SELECT * FROM runners ORDER BY id`)).rows.map(mapRunner);
    deps = testDispatchDeps(pool, { replicaId: 'replica-idle', acceptExceeding: true });
  });
  afterAll(async () => pool.end());

  const park = (runner: RunnerRow) => deps.registry.park({ runner, requestId: `${runner.id}-${Math.random()}`, slots: 1, onlyRunId: null, parkedAt: Date.now() }, 30_000);

  it('after a tick that found nothing due, runners parking read no parked runner until a claim finds work, which is delivered as before', async () => {
    const calls = [park(runners[0])];
    expect(await deps.tick()).toMatchObject({ waiters: 1, claimed: 0, delivered: 0, tookAll: true });
    expect(reads).toEqual([['rnr_i1']]);

    // More runners park (each kicks a tick): the ticks read the posture alone.
    calls.push(park(runners[1]));
    expect(await deps.tick()).toMatchObject({ waiters: 2, claimed: 0, delivered: 0, tookAll: true });
    calls.push(park(runners[2]));
    expect(await deps.tick()).toMatchObject({ waiters: 3, claimed: 0, delivered: 0, tookAll: true });
    expect(reads).toEqual([['rnr_i1'], [], []]);

    // Work arrives: the claim finds it, the parked runners are read then, and it is delivered.
    const run = await seedRun(db.current.pool, { steps: [{ name: 'a' }, { name: 'b' }] });
    expect(await deps.tick()).toMatchObject({ waiters: 3, claimed: 2, delivered: 2 });
    expect(reads.slice(3)).toEqual([[], ['rnr_i1', 'rnr_i2', 'rnr_i3']]);
    const offers = (await Promise.all(calls.slice(0, 2).map((c) => c.offers))).flat();
    expect(offers.map((o) => [o.run_id, o.step]).sort()).toEqual([[run.runId, 'a'], [run.runId, 'b']]);

    // That tick delivered: the next reads the parked runners with its claim again.
    park(runners[0]);
    await deps.tick();
    expect(reads.at(-1)!.sort()).toEqual(['rnr_i1', 'rnr_i3']);
  });
});
