import { describe, expect, it } from 'vitest';
import { queueEnqueue } from '../../src/store/queue.js';
import { CliProcess, runCli } from '../support/cli.js';
import { useTestDatabase } from '../support/db.js';
import { insertLease, insertRunner } from '../support/fleet.js';

const entry = (stepId: number, runId: number, extra: Record<string, unknown> = {}) => ({
  stepId,
  runId,
  attempt: 1,
  priority: 0,
  lane: 2 as const,
  fairKey: 'default',
  weight: 1,
  pools: [],
  requirement: null,
  load: 1,
  runScope: false,
  maxParallel: 1,
  siteStamp: null,
  ...extra,
});

describe('fleet drain --dry-run and --wait', () => {
  const db = useTestDatabase();
  const pool = () => db.current.pool;
  const cli = (...args: string[]) => runCli([...args, '--database-url', db.current.url]);

  it('--dry-run lists leases still out, pinned runs that will wait and stranded entries, and changes nothing', async () => {
    await insertRunner(pool(), { id: 'rnr_gpu', name: 'gpu-1', group: 'gpu', labels: ['cuda'] });
    await insertRunner(pool(), { id: 'rnr_cpu', name: 'cpu-1', group: 'cpu' });
    await pool().query(`INSERT INTO runs (id, name, scope, definition) VALUES (1, 'train', 'step', '{}'), (2, 'pinned', 'run', '{}'), (3, 'any', 'step', '{}')`);
    await pool().query(`INSERT INTO steps (id, run_id, name, command) VALUES (10, 1, 'fit', 'true'), (20, 2, 'one', 'true'), (21, 2, 'two', 'true'), (11, 1, 'eval', 'true'), (30, 3, 'lint', 'true')`);
    await insertLease(pool(), { stepId: 10, runId: 1, runnerId: 'rnr_gpu' });
    await insertLease(pool(), { stepId: 20, runId: 2, runnerId: 'rnr_gpu' });
    await pool().query(`UPDATE step_leases SET run_scope = true WHERE step_id = 20`);
    await pool().query(`INSERT INTO run_pins (run_id, runner_id) VALUES (2, 'rnr_gpu')`);
    await queueEnqueue(pool(), [
      entry(21, 2, { runScope: true }),
      entry(11, 1, { requirement: { labels: ['cuda'] } }),
      entry(30, 3), // any runner: cpu-1 still takes it
    ]);
    const auditBefore = (await pool().query(`SELECT count(*)::int AS n FROM audit_log`)).rows[0].n;

    const json = await cli('fleet', 'drain', 'gpu-1', '--dry-run', '--json');
    expect(json.code).toBe(0);
    const preview = JSON.parse(json.stdout);
    expect(preview).toMatchObject({ dryRun: true, target: { kind: 'runner', name: 'rnr_gpu', drained: false }, examined: 3, readyTotal: 3 });
    expect(preview.leases.map((l: any) => [l.stepId, l.step, l.run, l.runner])).toEqual([
      [10, 'fit', 'train', 'gpu-1'],
      [20, 'one', 'pinned', 'gpu-1'],
    ]);
    expect(preview.pinnedRuns).toEqual([{ runId: 2, run: 'pinned', runner: 'gpu-1', queued: 1 }]);
    expect(preview.stranded).toEqual([
      { stepId: 11, runId: 1, lane: 'bulk', reason: 'every matching runner drained (gpu-1)' },
      { stepId: 21, runId: 2, lane: 'bulk', reason: 'pinned runner gpu-1 busy: drained' },
    ]);

    const human = await cli('fleet', 'drain', '--group', 'gpu', '--dry-run');
    expect(human.stdout).toContain('dry run, nothing changed: group gpu (1 runner)');
    expect(human.stdout).toContain('leases still out (--wait waits for these): 2');
    expect(human.stdout).toContain('  run 1 (train) step fit attempt 1 on gpu-1');
    expect(human.stdout).toContain('pinned runs that will wait: 1');
    expect(human.stdout).toContain('queued entries left with no eligible runner: 2');

    expect((await pool().query(`SELECT count(*)::int AS n FROM audit_log`)).rows[0].n).toBe(auditBefore);
    expect((await pool().query(`SELECT drained FROM runners WHERE id = 'rnr_gpu'`)).rows[0].drained).toBe(false);
    expect((await pool().query(`SELECT count(*)::int AS n FROM runner_groups`)).rows[0].n).toBe(0);

    const unknown = await cli('fleet', 'drain', 'ghost', '--dry-run', '--json');
    expect(unknown.code).not.toBe(0);
    expect(JSON.parse(unknown.stdout).error).toMatchObject({ code: 'not_found', message: 'no runner with id or name ghost' });
    expect((await cli('fleet', 'drain', 'gpu-1', '--dry-run', '--wait')).code).toBe(2);
  });

  it('--wait returns when the last lease completes, printing what it waited for; a second drain says already drained', async () => {
    const run = new CliProcess(['fleet', 'drain', 'gpu-1', '--reason', 'driver update', '--wait', '--timeout', '2m', '--database-url', db.current.url]);
    try {
      // The drain is recorded first; then the wait names the two leases out, and sees them finish one by one.
      await run.waitForOutput(/waiting for 2 leases/);
      await pool().query(`DELETE FROM step_leases WHERE step_id = 10`);
      await run.waitForOutput(/finished: run 1 \(train\) step fit/);
      await pool().query(`DELETE FROM step_leases WHERE step_id = 20`);
      expect(await run.waitExit()).toBe(0);
    } finally {
      await run.stop();
    }
    const done = { stdout: run.output };
    const lines = done.stdout.trim().split('\n');
    expect(lines[0]).toBe('runner gpu-1 drained: its polls are answered empty, its running work continues');
    expect(done.stdout).toMatch(/waiting for 2 leases: run 1 \(train\) step fit attempt 1 on gpu-1; run 2 \(pinned\) step one attempt 1 on gpu-1/);
    expect(lines).toContain('waiting for 1 lease: run 2 (pinned) step one attempt 1 on gpu-1');
    expect(lines.at(-1)).toMatch(/^no lease held: waited \d+\.\ds for 2 leases$/);
    const { rows } = await pool().query(`SELECT actor, detail FROM audit_log WHERE action = 'fleet.drain'`);
    expect(rows[0].actor).toMatch(/^cli:/);
    expect(rows[0].detail).toMatchObject({ reason: 'driver update', changed: true });

    const again = await cli('fleet', 'drain', 'gpu-1', '--wait', '--json');
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ kind: 'runner', drained: true, changed: false, wait: { waitedFor: [] } });
    expect((await cli('fleet', 'drain', 'gpu-1')).stdout.trim()).toBe('runner gpu-1 already drained');
  });

  it('--wait exits 6 when a lease is still out at --timeout, naming it', async () => {
    await insertLease(pool(), { stepId: 30, runId: 3, runnerId: 'rnr_cpu' });
    const started = Date.now();
    const r = await cli('fleet', 'drain', '--group', 'cpu', '--wait', '--timeout', '1s', '--json');
    expect(r.code).toBe(6);
    expect(JSON.parse(r.stdout).error).toEqual({ code: 'timed_out', message: 'timed out after 1s: 1 lease still out (run 3 (any) step lint attempt 1 on cpu-1)' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
    // The drain itself stands: only the wait gave up.
    expect((await pool().query(`SELECT drained FROM runner_groups WHERE name = 'cpu'`)).rows[0].drained).toBe(true);
    expect((await cli('fleet', 'drain', '--group', 'cpu', '--timeout', '1s')).code).toBe(2);
  });
});
