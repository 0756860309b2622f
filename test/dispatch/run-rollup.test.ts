import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { completeLeases } from '../../src/dispatch/lifecycle.js';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import { createPool, type Pool, type PoolClient } from '../../src/store/pool.js';
import { TRIGGERS_CHANNEL } from '../../src/store/triggers.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { complete, deliver, leaseToken, registerRunner, runState, testDispatchDeps } from '../support/lifecycle.js';
import { recordStatements } from '../support/statements.js';

describe('the roll-up of the runs a completion group finishes', () => {
  const db = useTestDatabase();
  let pool: Pool;
  let statements: ReturnType<typeof recordStatements>;
  let listenPool: Pool;
  let listener: PoolClient;
  const notified: string[] = [];
  beforeAll(async () => {
    pool = createPool(db.current.url, { max: 2 });
    statements = recordStatements(pool);
    listenPool = createPool(db.current.url, { max: 1 });
    listener = await listenPool.connect();
    listener.on('notification', (n) => {
      if (n.channel === TRIGGERS_CHANNEL) notified.push(n.payload ?? '');
    });
    await listener.query(`LISTEN ${TRIGGERS_CHANNEL}`);
  });
  afterAll(async () => {
    listener.release();
    await listenPool.end();
    await pool.end();
  });

  it('finishes every run the group closed, each with its status and cause, unpins them and wakes the launch loop for the templated one', async () => {
    const store = db.current.pool;
    const deps = testDispatchDeps(pool);
    for (const r of ['rnr_a', 'rnr_b', 'rnr_c']) await registerRunner(store, r, r);
    const submit = async (text: string) => (await runSubmit(store, runFileLoad(text), { actor: 'test' })).runId;
    const pair = 'steps:\n  a: { run: a }\n  b: { run: b }\n';

    const one = await submit('name: one\nsteps:\n  a: { run: a }\n');
    const halfDone = await submit(`name: half-done\n${pair}`);
    const fails = await submit(`name: fails\n${pair}  c: { run: c, needs: [a] }\n`);
    const failedEarlier = await submit(`name: failed-earlier\n${pair}`);
    const lost = await submit(`name: lost\n${pair}`);
    const interrupted = await submit(`name: interrupted\n${pair}`);
    const templated = await submit('name: templated\nsteps:\n  a: { run: a }\n');
    const open = await submit(`name: open\n${pair}`);
    const runs = [one, halfDone, fails, failedEarlier, lost, interrupted, templated, open];
    await store.query(`UPDATE runs SET template_name = 'nightly' WHERE id = $1`, [templated]);
    await store.query(`INSERT INTO run_pins (run_id, runner_id) SELECT unnest($1::bigint[]), 'rnr_a'`, [runs]);

    // What happened before the group: a success, a failure with no cause, a lost runner.
    await complete(store, await deliver(store, { run: halfDone, step: 'a', runnerId: 'rnr_a' }), { status: 'succeeded', runnerId: 'rnr_a' });
    await complete(store, await deliver(store, { run: failedEarlier, step: 'a', runnerId: 'rnr_a' }), { status: 'failed', exitCode: 4, cause: null, runnerId: 'rnr_a' });
    await complete(store, await deliver(store, { run: lost, step: 'a', runnerId: 'rnr_a' }), { status: 'system_error', cause: 'runner lost: lease expired without a result', runnerId: 'rnr_a' });
    // No path leaves a cancelled step in a running run today; written directly to hold the rule.
    await store.query(`UPDATE steps SET status = 'cancelled', finished_at = now() WHERE run_id = $1 AND name = 'a'`, [interrupted]);
    await store.query(`UPDATE runs SET open_steps = open_steps - 1 WHERE id = $1`, [interrupted]);
    await store.query(`DELETE FROM queue_ready WHERE run_id = $1 AND step_id = (SELECT id FROM steps WHERE run_id = $1 AND name = 'a')`, [interrupted]);

    // The group: three runners complete the last steps of seven runs, and one step of an eighth.
    const out = async (run: number, step: string, runnerId: string, exitCode: number) => {
      const lease = await deliver(store, { run, step, runnerId });
      return { stepId: lease.stepId, token: await leaseToken(store, lease.stepId), exitCode, cause: null };
    };
    const byRunner = {
      rnr_a: [await out(one, 'a', 'rnr_a', 0), await out(halfDone, 'b', 'rnr_a', 0), await out(fails, 'a', 'rnr_a', 3)],
      rnr_b: [await out(fails, 'b', 'rnr_b', 0), await out(failedEarlier, 'b', 'rnr_b', 0), await out(lost, 'b', 'rnr_b', 1)],
      rnr_c: [await out(interrupted, 'b', 'rnr_c', 0), await out(templated, 'a', 'rnr_c', 0), await out(open, 'a', 'rnr_c', 0)],
    };
    await out(open, 'b', 'rnr_a', 0);
    notified.length = 0;

    const before = { ...deps.groupCommit.stats };
    statements.recording = true;
    const results = await Promise.all(Object.entries(byRunner).map(([runner, items]) => completeLeases(deps, runner, items)));
    statements.recording = false;
    expect(deps.groupCommit.stats).toEqual({ groups: before.groups + 1, calls: before.calls + 3 });
    expect(results.flat().every((r) => r.ok)).toBe(true);

    expect(await runState(store, one)).toEqual({ status: 'succeeded', cause: null, finished: true });
    expect(await runState(store, halfDone)).toEqual({ status: 'succeeded', cause: null, finished: true });
    expect(await runState(store, fails)).toEqual({ status: 'failed', cause: 'step a failed: exited with code 3', finished: true });
    expect(await runState(store, failedEarlier)).toEqual({ status: 'failed', cause: 'step a failed with exit code 4', finished: true });
    expect(await runState(store, lost)).toEqual({ status: 'error', cause: 'step a: runner lost: lease expired without a result', finished: true });
    expect(await runState(store, interrupted)).toEqual({ status: 'cancelled', cause: null, finished: true });
    expect(await runState(store, templated)).toEqual({ status: 'succeeded', cause: null, finished: true });
    expect(await runState(store, open)).toEqual({ status: 'running', cause: null, finished: false });

    const { rows: counters } = await store.query(`SELECT id, open_steps FROM runs WHERE id = ANY($1::bigint[]) ORDER BY id`, [runs]);
    expect(counters.map((r) => r.open_steps)).toEqual(runs.map((r) => (r === open ? 1 : 0)));
    const { rows: pins } = await store.query(`SELECT run_id FROM run_pins WHERE run_id = ANY($1::bigint[])`, [runs]);
    expect(pins.map((r) => Number(r.run_id))).toEqual([open]);
    await waitFor(() => notified.length > 0, { what: 'the templated run to notify' });
    expect(notified).toEqual(['run:nightly']);

    // The seven runs are finished by one statement, whatever their number.
    const finishing = statements.statements.filter((s) => /UPDATE runs r SET status\b/.test(s));
    expect(finishing).toHaveLength(1);
  });

  it('judges a run by the steps another transaction finished while this one waited for the run', async () => {
    const store = db.current.pool;
    const run = (await runSubmit(store, runFileLoad('name: raced\nsteps:\n  a: { run: a }\n  b: { run: b }\n'), { actor: 'test' })).runId;
    const a = await deliver(store, { run, step: 'a' });
    const b = await deliver(store, { run, step: 'b' });
    const first = await store.connect();
    const second = await store.connect();
    try {
      await first.query('BEGIN');
      await orchestratorHooks.stepsFinished(first, [{ stepId: a.stepId, runId: run, attempt: a.attempt, status: 'failed', exitCode: 3, cause: 'exited with code 3', runnerId: 'rnr_test' }]);
      await second.query('BEGIN');
      const pid = (await second.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      const closing = orchestratorHooks.stepsFinished(second, [{ stepId: b.stepId, runId: run, attempt: b.attempt, status: 'succeeded', exitCode: 0, cause: null, runnerId: 'rnr_test' }]);
      // The second counts its step off the run only once the first, holding the run, commits.
      await waitFor(async () => (await store.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`, [pid])).rows.length > 0, { intervalMs: 10, what: 'the second transaction to wait for the run' });
      await first.query('COMMIT');
      await closing;
      await second.query('COMMIT');
    } finally {
      first.release();
      second.release();
    }
    expect(await runState(store, run)).toEqual({ status: 'failed', cause: 'step a failed: exited with code 3', finished: true });
  });
});
