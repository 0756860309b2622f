import { describe, expect, it } from 'vitest';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import { storeInvariants } from '../../src/store/invariants.js';
import { useTestDatabase } from '../support/db.js';
import { deliver } from '../support/lifecycle.js';

describe('the store invariants the chaos tier checks', () => {
  const db = useTestDatabase();
  const broken = async () => Object.fromEntries((await storeInvariants(db.current.pool)).filter((i) => i.violations > 0).map((i) => [i.name, i.violations]));

  it('hold for runs in flight, and each names the rows that break it', async () => {
    const pool = db.current.pool;
    const { runId } = await runSubmit(pool, runFileLoad('name: inv\nsteps:\n  a: { run: "true" }\n  b: { run: "true", needs: [a] }\n  c: { run: "true" }\n'), { actor: 'test' });
    await deliver(pool, { run: runId, step: 'a' });
    expect(await broken()).toEqual({});

    // A counter off by one, a lease whose step is not running, a ready step nobody queued.
    await pool.query(`UPDATE runs SET open_steps = open_steps + 1 WHERE id = $1`, [runId]);
    expect(await broken()).toEqual({ run_counter_matches: 1 });
    await pool.query(`UPDATE runs SET open_steps = open_steps - 1 WHERE id = $1`, [runId]);
    await pool.query(`UPDATE steps SET status = 'succeeded' WHERE run_id = $1 AND name = 'a'`, [runId]);
    expect(await broken()).toMatchObject({ lease_has_origin: 1 });
    await pool.query(`UPDATE steps SET status = 'running' WHERE run_id = $1 AND name = 'a'`, [runId]);
    await pool.query(`DELETE FROM queue_ready WHERE run_id = $1`, [runId]);
    const [ready] = (await storeInvariants(pool)).filter((i) => i.name === 'open_step_is_in_flight');
    expect(ready.violations).toBe(1);
    expect(ready.sample).toEqual([expect.objectContaining({ status: 'ready' })]);
    await pool.query(`UPDATE runs SET status = 'succeeded' WHERE id = $1`, [runId]);
    expect(await broken()).toMatchObject({ finished_run_has_no_open_step: 3, lease_has_origin: 1 });
  });
});
