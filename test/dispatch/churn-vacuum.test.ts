import { describe, expect, it } from 'vitest';
import { ChurnVacuum } from '../../src/dispatch/churn-vacuum.js';
import { on } from '../../src/events.js';
import { completeLeases } from '../../src/dispatch/lifecycle.js';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import type { Pool } from '../../src/store/pool.js';
import { useTestDatabase } from '../support/db.js';
import { deliver, leaseToken, registerRunner, testDispatchDeps } from '../support/lifecycle.js';

describe('the lease table is vacuumed as completions empty it', () => {
  const db = useTestDatabase();

  /** Vacuums of the lease table PostgreSQL has counted. */
  const leaseTableStats = async (pool: Pool) => {
    const { rows } = await pool.query(`SELECT vacuum_count::int AS vacuums FROM pg_stat_user_tables WHERE relname = 'step_leases'`);
    return rows[0] as { vacuums: number };
  };

  it('a replica that has ended `leaseVacuumEvery` leases vacuums the table once, and starts counting again', async () => {
    const pool = db.current.pool;
    await registerRunner(pool, 'rnr_a', 'rnr_a');
    const deps = testDispatchDeps(pool, { leaseVacuumEvery: 3 });
    const { runId } = await runSubmit(pool, runFileLoad(`name: churn\nsteps:\n${['a', 'b', 'c', 'd', 'e'].map((s) => `  ${s}: { run: 'true' }\n`).join('')}`), { actor: 'test' });
    const held = [];
    for (const step of ['a', 'b', 'c', 'd', 'e']) {
      const { stepId } = await deliver(pool, { run: runId, step, runnerId: 'rnr_a' });
      held.push({ stepId, token: await leaseToken(pool, stepId), exitCode: 0, cause: null });
    }
    const before = await leaseTableStats(pool);
    const group = deps.groupCommit;
    const vacuumed: string[] = [];
    on(deps.events, 'lease:vacuumed', (p) => vacuumed.push(p.outcome));

    // Two ended: under the threshold, no vacuum.
    expect((await completeLeases(deps, 'rnr_a', held.slice(0, 2))).every((r) => r.ok)).toBe(true);
    await group.vacuum.idle();
    expect(group.vacuum.stats).toEqual({ runs: 0, failures: 0 });

    // The third reaches it: one vacuum, which PostgreSQL counts.
    expect((await completeLeases(deps, 'rnr_a', held.slice(2, 3))).every((r) => r.ok)).toBe(true);
    await group.vacuum.idle();
    expect(group.vacuum.stats).toEqual({ runs: 1, failures: 0 });
    expect(vacuumed).toEqual(['ok']);
    const after = await leaseTableStats(pool);
    expect(after.vacuums).toBe(before.vacuums + 1);

    // Two more: counting started again from zero.
    expect((await completeLeases(deps, 'rnr_a', held.slice(3))).every((r) => r.ok)).toBe(true);
    await group.vacuum.idle();
    expect(group.vacuum.stats).toEqual({ runs: 1, failures: 0 });
    const { rows: left } = await pool.query(`SELECT count(*)::int AS n FROM step_leases`);
    expect(left[0].n).toBe(0);
  });

  it('runs one vacuum at a time, keeps counting while one runs, reports a failure and goes on; 0 turns it off', async () => {
    const errors: unknown[] = [];
    let release: () => void = () => {};
    let calls = 0;
    const vacuum = new ChurnVacuum(
      10,
      () => {
        calls++;
        if (calls === 2) return Promise.reject(new Error('store unavailable'));
        return new Promise<void>((r) => (release = r));
      },
      (err) => errors.push(err),
    );
    vacuum.deleted(9);
    expect(calls).toBe(0);
    vacuum.deleted(1);
    expect(calls).toBe(1);
    // While it runs, more deletes are counted but start nothing.
    vacuum.deleted(25);
    expect(calls).toBe(1);
    release();
    await vacuum.idle();
    // The next delete finds the count past the threshold: the second vacuum fails and is reported.
    vacuum.deleted(1);
    expect(calls).toBe(2);
    await vacuum.idle();
    expect(errors.map((e) => (e as Error).message)).toEqual(['store unavailable']);
    expect(vacuum.stats).toEqual({ runs: 2, failures: 1 });
    vacuum.deleted(10);
    expect(calls).toBe(3);
    release();
    await vacuum.idle();

    const off = new ChurnVacuum(0, () => Promise.reject(new Error('never')), (err) => errors.push(err));
    off.deleted(1_000_000);
    await off.idle();
    expect(off.stats).toEqual({ runs: 0, failures: 0 });
  });
});
