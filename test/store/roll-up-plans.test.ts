import { describe, expect, it } from 'vitest';
import { runSubmitMany } from '../../src/orchestrator/submit.js';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { runsFinish, stepsFinishClose, stepsReleaseAfter } from '../../src/store/runs.js';
import { useTestDatabase } from '../support/db.js';
import { genericPlan } from '../support/plans.js';

describe('the roll-up statements reach their rows by key, however large the estate', () => {
  const db = useTestDatabase();

  it('finishing runs reads them by id even where statistics show few running; dependents are found run by run; no list is rescanned per row', async () => {
    const pool = db.current.pool;
    const file = (i: number) => runFileLoad(`name: r${i}\nsteps:\n  a: { run: echo a }\n  b: { run: echo b, needs: [a] }\n  c: { run: echo c, needs: [a] }\n`, []);
    // The steps are never analysed (a new estate, or one autovacuum has not reached yet).
    const runs = [];
    for (let i = 0; i < 6; i++) runs.push(...(await runSubmitMany(pool, Array.from({ length: 100 }, (_, k) => file(i * 100 + k)), { actor: 'test' })));
    // The runs' statistics taken while nearly every run had ended; then every run is running again.
    await pool.query(`UPDATE runs SET status = 'succeeded' WHERE id % 50 <> 0`);
    await pool.query(`ANALYZE runs`);
    await pool.query(`UPDATE runs SET status = 'running'`);
    const ids = runs.map((r) => r.runId);
    const some = ids.filter((_, i) => i % 37 === 0);
    const client = await pool.connect();
    try {
      const finish = await genericPlan(client, (c) => runsFinish(c, { runIds: some, override: { status: 'cancelled', cause: 'test' } }));
      expect(finish.filter((n) => n['Index Name'] === 'runs_status_idx')).toEqual([]);

      // 120 steps of 120 runs finish together, and free 240 dependents: each CTE is read once.
      const { rows: roots } = await pool.query(`SELECT id::int, attempt, run_id::int FROM steps WHERE name = 'a' AND run_id = ANY($1::bigint[]) ORDER BY id LIMIT 120`, [ids]);
      const close = await genericPlan(client, (c) =>
        stepsFinishClose(c, roots.map((r) => ({ stepId: r.id, attempt: r.attempt, status: 'succeeded' as const, exitCode: 0, cause: null, runnerId: null, seal: false }))),
      );
      expect(close.filter((n) => n['Node Type'] === 'CTE Scan' && (n['Actual Loops'] ?? 0) > 1)).toEqual([]);
      const release = await genericPlan(client, (c) => stepsReleaseAfter(c, roots.map((r) => ({ runId: r.run_id, name: 'a' }))));
      expect(release.filter((n) => n['Node Type'] === 'CTE Scan' && (n['Actual Loops'] ?? 0) > 1)).toEqual([]);
      // The dependents are found run by run through the index, not by scanning the pending steps.
      expect(release.filter((n) => n['Node Type'] === 'Seq Scan')).toEqual([]);
    } finally {
      client.release();
    }
  });
});
