import { writeFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runCancel } from '../../src/orchestrator/cancel.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { Fleet } from './e2e-support.js';
import { alive } from './process-state.js';

/** Every step appends its name to SIDE: the side effects are counted, not the status rows. */
const diamond = (side: string, failing?: string) => ({
  name: 'diamond',
  env: { SIDE: side },
  steps: {
    a: { run: 'echo "$OPSCHAIN_STEP" | tee -a "$SIDE"' },
    b: { run: `echo "$OPSCHAIN_STEP" | tee -a "$SIDE"; ${failing === 'b' ? 'exit 3' : 'true'}`, needs: ['a'] },
    c: { run: 'echo "$OPSCHAIN_STEP" | tee -a "$SIDE"', needs: ['a'] },
    d: { run: 'echo "$OPSCHAIN_STEP" | tee -a "$SIDE"', needs: ['b', 'c'] },
  },
});

// Real processes on a shared machine: generous bounds, conditions not timings.
describe('runs reach real runner processes', { timeout: 150_000 }, () => {
  const db = useTestDatabase();
  let fleet: Fleet;
  beforeAll(async () => {
    fleet = new Fleet(db.current.pool, db.current.url);
    await fleet.startServer({ leaseTtlMs: 3_000 });
  });
  afterEach(async () => {
    // Each test's runners go; the server stays (failover adds and stops its own).
    await Promise.all(fleet.runners.splice(0).map((r) => r.stop('SIGKILL')));
  });
  afterAll(async () => {
    await fleet?.stopAll();
    fleet?.cleanup();
  });

  it('a diamond succeeds with every step run once, in dependency order, its output in the step log', async () => {
    const runner = fleet.runner('diamond', ['--max-parallel-steps', '2']);
    await fleet.ready(runner);
    const runId = await fleet.submit(diamond(fleet.path('diamond.side')));
    expect(await fleet.runDone(runId)).toMatchObject({ status: 'succeeded' });
    const order = fleet.lines('diamond.side');
    expect(order).toHaveLength(4);
    expect(order[0]).toBe('a');
    expect(order.slice(1, 3).sort()).toEqual(['b', 'c']);
    expect(order[3]).toBe('d');
    const steps = await fleet.steps(runId);
    for (const s of Object.values(steps)) expect(s).toMatchObject({ status: 'succeeded', attempt: 1, exit_code: 0 });
    const logs = await db.current.pool.query(
      `SELECT s.name, string_agg(l.chunk, '' ORDER BY l.id) AS text FROM step_logs l JOIN steps s ON s.id = l.step_id WHERE s.run_id = $1 AND l.stream = 'stdout' GROUP BY s.name`,
      [runId],
    );
    expect(Object.fromEntries(logs.rows.map((r) => [r.name, r.text]))).toEqual({ a: 'a\n', b: 'b\n', c: 'c\n', d: 'd\n' });
  });

  it('a failing step fails the run, skips its dependents, and its exit code is recorded', async () => {
    const runner = fleet.runner('failing');
    await fleet.ready(runner);
    const runId = await fleet.submit(diamond(fleet.path('failing.side'), 'b'));
    expect(await fleet.runDone(runId)).toMatchObject({ status: 'failed' });
    expect(fleet.lines('failing.side').sort()).toEqual(['a', 'b', 'c']);
    const steps = await fleet.steps(runId);
    expect(steps.b).toMatchObject({ status: 'failed', exit_code: 3 });
    expect(steps.d.status).toBe('skipped');
  });

  it('kill -9 of a runner mid-step: runner_lost after the TTL, the run ends error; its restart ends the orphaned step', async () => {
    const runner = fleet.runner('killed');
    await fleet.ready(runner);
    const runId = await fleet.submit({ name: 'lost', steps: { slow: { run: `echo $$ > ${fleet.path('lost.pid')}; sleep 300` } } });
    const pid = await fleet.pidFrom('lost.pid');
    // The runner has recorded the step once it says it started it.
    await runner.waitForOutput(/step slow of run \d+ started/);
    await runner.stop('SIGKILL');
    expect(await fleet.runDone(runId, 60_000)).toMatchObject({ status: 'error' });
    const steps = await fleet.steps(runId);
    expect(steps.slow).toMatchObject({ status: 'system_error', cause: 'runner lost: lease expired without a result' });
    // SIGKILL gave the runner no chance to end the step; its next start does.
    expect(alive(pid)).toBe(true);
    const again = fleet.runner('killed');
    await fleet.ready(again);
    await waitFor(() => !alive(pid), { what: 'orphaned step ended by the restarted runner' }).catch((err: Error) => {
      throw new Error(`${err.message}; restarted runner said: ${again.output.slice(-3000)}`);
    });
    expect(again.output).toMatch(/ended step slow of run \d+ \(pid \d+\), left running by a previous run of this runner/);
  });

  it('cancel kills the running step\'s whole process group; the runner carries on', async () => {
    const runner = fleet.runner('cancel');
    await fleet.ready(runner);
    const runId = await fleet.submit({ name: 'cancel', steps: { slow: { run: `echo $$ > ${fleet.path('cancel.pid')}; sleep 300 & echo $! > ${fleet.path('cancel.bg')}; wait` } } });
    const shell = await fleet.pidFrom('cancel.pid');
    const bg = await fleet.pidFrom('cancel.bg');
    const r = await runCancel(db.current.pool, runId, { actor: 'e2e' });
    expect(r).toMatchObject({ cancelled: true, revoked: 1 });
    await waitFor(() => !alive(shell) && !alive(bg), { what: 'step process group killed', timeoutMs: 30_000 });
    await runner.waitForOutput(/lease expired or revoked/);
    expect(runner.running).toBe(true);
    const next = await fleet.submit({ name: 'after-cancel', steps: { ok: { run: 'true' } } });
    expect(await fleet.runDone(next)).toMatchObject({ status: 'succeeded' });
  });

  it('a restarted runner keeps its identity', async () => {
    const first = fleet.runner('restart');
    const id = await fleet.ready(first);
    expect(first.output).toMatch(/registered as rnr_/);
    expect(await first.stop('SIGTERM')).toBe(0);
    const second = fleet.runner('restart');
    expect(await fleet.ready(second)).toBe(id);
    expect(second.output).toMatch(/resumed its identity/);
    const runId = await fleet.submit({ name: 'who', steps: { one: { run: 'true' } } });
    expect(await fleet.runDone(runId)).toMatchObject({ status: 'succeeded' });
    expect((await fleet.steps(runId)).one.runner_id).toBe(id);
    const { rows } = await db.current.pool.query(`SELECT count(*)::int AS n FROM runners WHERE name = 'restart'`);
    expect(rows[0].n).toBe(1);
  });

  it('SIGTERM lets the running step finish and report, then exits 0', async () => {
    const runner = fleet.runner('graceful', ['--grace', '60s']);
    await fleet.ready(runner);
    const go = fleet.path('graceful.go');
    const runId = await fleet.submit({
      name: 'graceful',
      env: { SIDE: fleet.path('graceful.side') },
      steps: { wait: { run: `echo started >> "$SIDE"; while [ ! -e ${go} ]; do sleep 0.05; done; echo finished >> "$SIDE"` } },
    });
    await waitFor(() => fleet.lines('graceful.side').includes('started'), { what: 'step started' });
    runner.child.kill('SIGTERM');
    await runner.waitForOutput(/stopping: no new work/);
    writeFileSync(go, '');
    expect(await runner.waitExit()).toBe(0);
    expect(fleet.lines('graceful.side')).toEqual(['started', 'finished']);
    expect(await fleet.runDone(runId)).toMatchObject({ status: 'succeeded' });
  });

  it('fails over to the next server in its list when the first stops', async () => {
    const second = await fleet.startServer({ leaseTtlMs: 3_000 });
    const first = fleet.servers[0];
    const runner = fleet.runner('failover', [], [first.url, second.url]);
    const id = await fleet.ready(runner);
    const before = await fleet.submit({ name: 'before', steps: { one: { run: 'true' } } });
    expect(await fleet.runDone(before)).toMatchObject({ status: 'succeeded' });
    await first.stop();
    await runner.waitForOutput(new RegExp(`failing over to ${second.url.replace(/[.]/g, '\\.')}`), 60_000);
    fleet.servers.splice(fleet.servers.indexOf(first), 1);
    const side = fleet.path('failover.side');
    const after = await fleet.submit({ name: 'after', env: { SIDE: side }, steps: { one: { run: 'echo one >> "$SIDE"' }, two: { run: 'echo two >> "$SIDE"', needs: ['one'] } } });
    expect(await fleet.runDone(after, 90_000)).toMatchObject({ status: 'succeeded' });
    expect(fleet.lines('failover.side')).toEqual(['one', 'two']);
    expect((await fleet.steps(after)).two.runner_id).toBe(id);
  });
});
