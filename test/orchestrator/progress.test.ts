import { describe, expect, it } from 'vitest';
import { runCancel } from '../../src/orchestrator/cancel.js';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import { runRetry } from '../../src/orchestrator/retry.js';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { enqueueFreedSteps } from '../../src/orchestrator/enqueue.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import { stepLogAppend, stepLogRead } from '../../src/store/logs.js';
import { withTransaction } from '../../src/store/pool.js';
import { QUEUE_CHANNEL, queueEnqueue } from '../../src/store/queue.js';
import { leaseDeliver } from '../../src/store/leases.js';
import { runLock, runSteps, stepsLockRun } from '../../src/store/runs.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { complete, deliver, queued, registerRunner, runState, runStep, stepStates } from '../support/lifecycle.js';

const DIAMOND = `
name: diamond
steps:
  a: { run: echo a }
  b: { run: echo b, needs: [a] }
  c: { run: echo c, needs: [a] }
  d: { run: echo d, needs: [b, c] }
`;

describe('orchestration through the lease lifecycle hooks', () => {
  const db = useTestDatabase();
  const submit = async (text: string, sets: string[] = []) => (await runSubmit(db.current.pool, runFileLoad(text, sets), { actor: 'test' })).runId;

  it('diamond: roots first, d only once both b and c succeeded, then the run succeeds and its pin goes', async () => {
    const pool = db.current.pool;
    const run = await submit(DIAMOND);
    expect(await queued(pool, run)).toEqual([['a', 1]]);
    expect(await stepStates(pool, run)).toEqual({ a: 'ready/1', b: 'pending/0', c: 'pending/0', d: 'pending/0' });
    await pool.query(`INSERT INTO run_pins (run_id, runner_id) VALUES ($1, 'rnr_test')`, [run]);

    const a = await deliver(pool, { run, step: 'a' });
    expect(await stepStates(pool, run)).toMatchObject({ a: 'running/1' });
    await complete(pool, a, { status: 'succeeded' });
    expect(await queued(pool, run)).toEqual([['b', 1], ['c', 1]]);

    await runStep(pool, run, 'b');
    expect(await queued(pool, run)).toEqual([['c', 1]]);
    expect(await stepStates(pool, run)).toMatchObject({ d: 'pending/0' });
    await runStep(pool, run, 'c');
    expect(await queued(pool, run)).toEqual([['d', 1]]);
    expect((await runState(pool, run)).status).toBe('running');
    await runStep(pool, run, 'd');
    expect(await runState(pool, run)).toEqual({ status: 'succeeded', cause: null, finished: true });
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM run_pins WHERE run_id = $1`, [run]);
    expect(rows[0].n).toBe(0);
    const { rows: audit } = await pool.query(`SELECT actor, action FROM audit_log WHERE target = $1`, [`run:${run}`]);
    expect(audit).toEqual([{ actor: 'test', action: 'runs.submit' }]);
  });

  it('siblings finishing in concurrent transactions free their dependent exactly once', async () => {
    const pool = db.current.pool;
    const run = await submit(DIAMOND);
    await runStep(pool, run, 'a');
    const b = await deliver(pool, { run, step: 'b' });
    const c = await deliver(pool, { run, step: 'c' });
    await Promise.all([complete(pool, b, { status: 'succeeded' }), complete(pool, c, { status: 'succeeded' })]);
    expect(await queued(pool, run)).toEqual([['d', 1]]);
  });

  it('the batch hooks lock each run once, in run order, and free a join exactly once', async () => {
    const pool = db.current.pool;
    const r1 = await submit(DIAMOND);
    const r2 = await submit('name: two\nsteps:\n  x: { run: exit 1, needs: [] }\n  y: { run: echo y, needs: [x] }\n');
    await runStep(pool, r1, 'a');
    const b = await deliver(pool, { run: r1, step: 'b' });
    const c = await deliver(pool, { run: r1, step: 'c' });
    const x = await deliver(pool, { run: r2, step: 'x' });
    await withTransaction(pool, (client) =>
      orchestratorHooks.stepsFinished(client, [
        { stepId: x.stepId, runId: r2, attempt: 1, status: 'failed', exitCode: 1, cause: 'exited with code 1', runnerId: 'rnr_test' },
        { stepId: c.stepId, attempt: 1, status: 'succeeded', exitCode: 0, cause: null, runnerId: 'rnr_test' },
        { stepId: b.stepId, runId: r1, attempt: 1, status: 'succeeded', exitCode: 0, cause: null, runnerId: 'rnr_test' },
        // A stale attempt in the same batch is ignored.
        { stepId: b.stepId, runId: r1, attempt: 7, status: 'failed', exitCode: 1, cause: null, runnerId: 'rnr_test' },
      ]),
    );
    expect(await queued(pool, r1)).toEqual([['d', 1]]);
    expect(await stepStates(pool, r1)).toEqual({ a: 'succeeded/1', b: 'succeeded/1', c: 'succeeded/1', d: 'ready/1' });
    expect(await runState(pool, r2)).toEqual({ status: 'failed', cause: 'step x failed: exited with code 1', finished: true });
    expect(await stepStates(pool, r2)).toEqual({ x: 'failed/1', y: 'skipped/0' });
  });

  it('a failure skips its dependents transitively, lets independent work finish, then fails the run', async () => {
    const pool = db.current.pool;
    const run = await submit(`
name: failing
steps:
  a: { run: exit 3 }
  b: { run: echo b, needs: [a] }
  c: { run: echo c, needs: [b] }
  other: { run: echo other }
`);
    expect(await queued(pool, run)).toEqual([['a', 1], ['other', 1]]);
    const other = await deliver(pool, { run, step: 'other' });
    await complete(pool, await deliver(pool, { run, step: 'a' }), { status: 'failed', exitCode: 3 });
    expect(await stepStates(pool, run)).toEqual({ a: 'failed/1', b: 'skipped/0', c: 'skipped/0', other: 'running/1' });
    expect((await runState(pool, run)).status).toBe('running');
    await complete(pool, other, { status: 'succeeded' });
    expect(await runState(pool, run)).toEqual({ status: 'failed', cause: 'step a failed with exit code 3', finished: true });
    const { rows } = await pool.query(`SELECT name, cause FROM steps WHERE run_id = $1 AND status = 'skipped' ORDER BY name`, [run]);
    expect(rows).toEqual([{ name: 'b', cause: 'skipped: step a failed' }, { name: 'c', cause: 'skipped: step a failed' }]);
  });

  it('system_error ends the run in error and seals the step log with a system line', async () => {
    const pool = db.current.pool;
    const run = await submit('name: lost\nsteps:\n  a: { run: sleep 100 }\n  b: { run: echo b, needs: [a] }\n');
    const a = await deliver(pool, { run, step: 'a' });
    expect(await stepLogAppend(pool, { stepId: a.stepId, attempt: 1, chunks: [{ stream: 'stdout', text: 'working\n' }] })).toEqual({ stored: 1, truncated: false });
    await complete(pool, a, { status: 'system_error', cause: 'runner lost: lease expired without a result', event: 'runner_lost' });
    expect(await runState(pool, run)).toEqual({ status: 'error', cause: 'step a: runner lost: lease expired without a result', finished: true });
    expect(await stepStates(pool, run)).toEqual({ a: 'system_error/1', b: 'skipped/0' });
    const { rows } = await pool.query(`SELECT log_sealed FROM steps WHERE id = $1`, [a.stepId]);
    expect(rows[0].log_sealed).toBe(true);
    // Late output from the lost runner is refused.
    expect(await stepLogAppend(pool, { stepId: a.stepId, attempt: 1, chunks: [{ stream: 'stdout', text: 'late\n' }] })).toEqual({ stored: 0, truncated: false });
    const lines = await stepLogRead(pool, { runId: run });
    expect(lines.map((l) => [l.stream, l.text])).toEqual([
      ['system', 'attempt 1 started on runner rnr_test'],
      ['stdout', 'working\n'],
      ['system', 'attempt 1 ended in system_error: runner lost: lease expired without a result; log sealed'],
    ]);
  });

  it('retry re-enters failed steps as a new attempt; dependents follow; a stale attempt changes nothing', async () => {
    const pool = db.current.pool;
    const run = await submit(DIAMOND);
    await runStep(pool, run, 'a');
    await runStep(pool, run, 'b', 'failed');
    const c = await deliver(pool, { run, step: 'c' });
    await complete(pool, c, { status: 'system_error', cause: 'runner lost: lease expired without a result' });
    expect((await runState(pool, run)).status).toBe('error');
    expect(await stepStates(pool, run)).toEqual({ a: 'succeeded/1', b: 'failed/1', c: 'system_error/1', d: 'skipped/0' });

    const retried = await runRetry(pool, run, { actor: 'test' });
    expect(retried).toEqual({ id: run, status: 'running', retried: [{ name: 'b', attempt: 2 }, { name: 'c', attempt: 2 }], reopened: ['d'] });
    expect(await runState(pool, run)).toEqual({ status: 'running', cause: null, finished: false });
    expect(await queued(pool, run)).toEqual([['b', 2], ['c', 2]]);
    expect(await stepStates(pool, run)).toEqual({ a: 'succeeded/1', b: 'ready/2', c: 'ready/2', d: 'pending/0' });
    // A retried step's log is open again for its new attempt.
    const { rows } = await pool.query(`SELECT log_sealed FROM steps WHERE id = $1`, [c.stepId]);
    expect(rows[0].log_sealed).toBe(false);

    // The old attempt finishing again (a duplicate or late completion) is ignored.
    await complete(pool, c, { status: 'succeeded' });
    expect(await stepStates(pool, run)).toMatchObject({ c: 'ready/2' });

    // Retrying while nothing has failed is a no-op.
    expect(await runRetry(pool, run, { actor: 'test' })).toEqual({ id: run, status: 'running', retried: [], reopened: [] });

    await runStep(pool, run, 'b');
    await runStep(pool, run, 'c');
    expect(await queued(pool, run)).toEqual([['d', 1]]);
    await runStep(pool, run, 'd');
    expect((await runState(pool, run)).status).toBe('succeeded');
    await expect(runRetry(pool, 999_999)).rejects.toThrow('no run with id 999999');
  });

  it('cancel removes queue rows, revokes leases and their pool holds, cancels open steps; twice is a no-op', async () => {
    const pool = db.current.pool;
    const run = await submit('name: c\nsteps:\n  a: { run: sleep 100, pools: [db] }\n  b: { run: echo b }\n  c: { run: echo c, needs: [a] }\n');
    const a = await deliver(pool, { run, step: 'a', pools: ['db'] });
    await pool.query(`INSERT INTO run_pins (run_id, runner_id) VALUES ($1, 'rnr_test')`, [run]);
    const other = await submit('name: other\nsteps:\n  x: { run: echo x }\n');

    const result = await runCancel(pool, run, { actor: 'alice' });
    expect(result).toEqual({ id: run, status: 'cancelled', cancelled: true, steps: ['a', 'b', 'c'], revoked: 1 });
    const counts = await pool.query(
      `SELECT (SELECT count(*) FROM queue_ready WHERE run_id = $1)::int AS queue, (SELECT count(*) FROM step_leases WHERE run_id = $1)::int AS leases,
              (SELECT count(*) FROM pool_holds WHERE step_id = $2)::int AS holds, (SELECT count(*) FROM run_pins WHERE run_id = $1)::int AS pins`,
      [run, a.stepId],
    );
    expect(counts.rows[0]).toEqual({ queue: 0, leases: 0, holds: 0, pins: 0 });
    expect(await queued(pool, other)).toEqual([['x', 1]]);
    expect(await stepStates(pool, run)).toEqual({ a: 'cancelled/1', b: 'cancelled/1', c: 'cancelled/0' });
    expect(await runState(pool, run)).toEqual({ status: 'cancelled', cause: 'cancelled by alice', finished: true });

    // The revoked runner's late completion changes nothing.
    await complete(pool, a, { status: 'succeeded' });
    expect(await stepStates(pool, run)).toMatchObject({ a: 'cancelled/1', c: 'cancelled/0' });
    expect(await runCancel(pool, run, { actor: 'alice' })).toEqual({ id: run, status: 'cancelled', cancelled: false, steps: [], revoked: 0 });
    await runStep(pool, other, 'x');
    expect(await runCancel(pool, other, { actor: 'alice' })).toEqual({ id: other, status: 'succeeded', cancelled: false, steps: [], revoked: 0 });
    await expect(runCancel(pool, 999_999)).rejects.toThrow('no run with id 999999');
  });

  it('a delivery that commits while cancel waits on its claimed entry is revoked too', async () => {
    const pool = db.current.pool;
    const run = await submit('name: cancel-race\nsteps:\n  a: { run: sleep 100 }\n');
    const { rows } = await pool.query(`SELECT id FROM steps WHERE run_id = $1`, [run]);
    // A dispatcher's transaction: the entry claimed (locked), not yet delivered.
    const dispatcher = await pool.connect();
    try {
      await dispatcher.query('BEGIN');
      await dispatcher.query(`SELECT 1 FROM queue_ready WHERE run_id = $1 FOR UPDATE`, [run]);
      const cancelling = runCancel(pool, run, { actor: 'alice' });
      await waitFor(async () => (await pool.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FROM queue_ready%' AND pid <> pg_backend_pid()`)).rowCount, { what: 'cancel waiting on the claimed entry' });
      const [{ lease }] = await leaseDeliver(dispatcher, { holder: 'replica-x', ttlMs: 60_000, ackMs: 20_000, items: [{ stepId: Number(rows[0].id), runnerId: 'rnr_test', requestId: null }] });
      await orchestratorHooks.stepsStarted(dispatcher, [{ stepId: lease.stepId, attempt: lease.attempt, runnerId: 'rnr_test' }]);
      await dispatcher.query('COMMIT');
      expect(await cancelling).toMatchObject({ cancelled: true, steps: ['a'], revoked: 1 });
    } finally {
      dispatcher.release();
    }
    expect((await pool.query(`SELECT count(*)::int AS n FROM step_leases WHERE run_id = $1`, [run])).rows[0].n).toBe(0);
    expect(await stepStates(pool, run)).toEqual({ a: 'cancelled/1' });
  });

  it('cancel takes a run\'s steps before its row, as retry does: the two queue on each other, neither is a deadlock victim', async () => {
    const pool = db.current.pool;
    const run = await submit('name: cancel-retry\nsteps:\n  a: { run: exit 1 }\n  b: { run: sleep 100 }\n');
    await deliver(pool, { run, step: 'b' });
    await runStep(pool, run, 'a', 'failed');
    // A retry's transaction, paused between its two locks: the run's steps held, the run row not yet.
    const retrying = await pool.connect();
    try {
      await retrying.query('BEGIN');
      await stepsLockRun(retrying, run);
      const cancelling = runCancel(pool, run, { actor: 'alice' });
      await waitFor(async () => (await pool.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FROM steps WHERE run_id%' AND pid <> pg_backend_pid()`)).rowCount, { what: 'cancel waiting on the steps' });
      // The run row is free: cancel waits on the steps before taking it.
      expect((await runLock(retrying, run))?.status).toBe('running');
      await retrying.query('COMMIT');
      expect(await cancelling).toMatchObject({ cancelled: true, steps: ['b'], revoked: 1 });
    } finally {
      retrying.release();
    }
    expect(await stepStates(pool, run)).toEqual({ a: 'failed/1', b: 'cancelled/1' });
  });

  it('retry after a cancel re-enters what was interrupted, so nothing is left stranded', async () => {
    const pool = db.current.pool;
    const run = await submit('name: cr\nsteps:\n  a: { run: exit 1 }\n  b: { run: sleep 100 }\n  d: { run: echo d, needs: [a, b] }\n');
    const b = await deliver(pool, { run, step: 'b' });
    await runStep(pool, run, 'a', 'failed');
    expect(await stepStates(pool, run)).toEqual({ a: 'failed/1', b: 'running/1', d: 'skipped/0' });
    await runCancel(pool, run, { actor: 'test' });
    expect(await stepStates(pool, run)).toEqual({ a: 'failed/1', b: 'cancelled/1', d: 'skipped/0' });
    expect(await runRetry(pool, run, { actor: 'test' })).toEqual({ id: run, status: 'running', retried: [{ name: 'a', attempt: 2 }, { name: 'b', attempt: 2 }], reopened: ['d'] });
    expect(await queued(pool, run)).toEqual([['a', 2], ['b', 2]]);
    // The revoked attempt of b finishing late changes nothing.
    await complete(pool, b, { status: 'succeeded' });
    expect(await stepStates(pool, run)).toMatchObject({ b: 'ready/2' });
    await runStep(pool, run, 'a');
    await runStep(pool, run, 'b');
    await runStep(pool, run, 'd');
    expect(await runState(pool, run)).toEqual({ status: 'succeeded', cause: null, finished: true });
    // b's first attempt was cancelled while running and re-entered through pending: each attempt's
    // start shows once, before that attempt's lines.
    expect((await stepLogRead(pool, { runId: run, step: 'b' })).map((l) => `${l.attempt} ${l.text}`)).toEqual([
      '1 attempt 1 started on runner rnr_test',
      '1 cancelled by test; the runner was told to stop',
      '2 retried by test as attempt 2',
      '2 attempt 2 started on runner rnr_test',
    ]);
  });

  it('enqueue idempotency holds through the hooks: duplicate completions and re-enqueues queue once', async () => {
    const pool = db.current.pool;
    const run = await submit(DIAMOND);
    const a = await deliver(pool, { run, step: 'a' });
    await complete(pool, a, { status: 'succeeded' });
    await complete(pool, a, { status: 'succeeded' });
    expect(await queued(pool, run)).toEqual([['b', 1], ['c', 1]]);
    // The same (step, attempt) enqueued again while ready, while leased, or once done is left alone.
    const { rows } = await pool.query(`SELECT id FROM steps WHERE run_id = $1 AND name = 'b'`, [run]);
    const item = { stepId: rows[0].id, runId: run, attempt: 1, priority: 0, lane: 2 as const, fairKey: 'default', pools: [], requirement: null, load: 1, runScope: false, maxParallel: 1, siteStamp: null };
    expect(await withTransaction(pool, (cl) => queueEnqueue(cl, [item]))).toEqual([]);
    const b = await deliver(pool, { run, step: 'b' });
    expect(await withTransaction(pool, (cl) => queueEnqueue(cl, [item]))).toEqual([]);
    await complete(pool, b, { status: 'succeeded' });
    expect(await withTransaction(pool, (cl) => queueEnqueue(cl, [item]))).toEqual([]);
    expect(await queued(pool, run)).toEqual([['c', 1]]);
  });

  it('an enqueue that queues something wakes the dispatchers on commit, one notification however many rows; one that queues nothing is silent', async () => {
    const pool = db.current.pool;
    const listener = await pool.connect();
    const heard: string[] = [];
    listener.on('notification', (n) => heard.push(n.channel));
    try {
      await listener.query(`LISTEN ${QUEUE_CHANNEL}`);
      const run = await submit('name: wake\nsteps:\n  a: { run: echo a }\n  b: { run: echo b, needs: [a] }\n  c: { run: echo c, needs: [a] }\n');
      await waitFor(() => heard.length === 1, { what: 'the submit\'s notification' });
      const { rows } = await pool.query(`SELECT id::int, name FROM steps WHERE run_id = $1 AND name IN ('b', 'c') ORDER BY name`, [run]);
      const item = (stepId: number) => ({ stepId, runId: run, attempt: 1, priority: 0, lane: 2 as const, fairKey: 'default', pools: [], requirement: null, load: 1, runScope: false, maxParallel: 1, siteStamp: null });
      const queuedIds = await withTransaction(pool, async (cl) => {
        const ids = await queueEnqueue(cl, rows.map((r) => item(r.id)));
        // Nothing is heard before the commit.
        await listener.query('SELECT 1');
        expect(heard).toHaveLength(1);
        return ids;
      });
      expect(queuedIds).toEqual(rows.map((r) => r.id));
      await waitFor(() => heard.length === 2, { what: 'the enqueue\'s notification' });
      // Both rows again: already ready, nothing queued, nothing sent.
      expect(await withTransaction(pool, (cl) => queueEnqueue(cl, rows.map((r) => item(r.id))))).toEqual([]);
      await listener.query('SELECT 1');
      expect(heard).toEqual([QUEUE_CHANNEL, QUEUE_CHANNEL]);
    } finally {
      await listener.query(`UNLISTEN *`);
      listener.release();
    }
  });

  it('starting attempts is one statement per hook call and writes no log row; the started lines are read from the steps', async () => {
    const pool = db.current.pool;
    await registerRunner(pool, 'rnr_named', 'build-05');
    const run = await submit('name: starts\nsteps:\n  a: { run: echo a }\n  b: { run: echo b }\n  c: { run: echo c }\n');
    const { rows } = await pool.query(`SELECT id::int, name FROM steps WHERE run_id = $1 ORDER BY name`, [run]);
    const [a, b, c] = rows.map((r) => r.id as number);
    const sent: string[] = [];
    await withTransaction(pool, async (client) => {
      const original = client.query.bind(client) as (...x: unknown[]) => unknown;
      (client as unknown as { query: (...x: unknown[]) => unknown }).query = (...args: unknown[]) => {
        sent.push(String(args[0]));
        return original(...args);
      };
      await orchestratorHooks.stepsStarted(client, [{ stepId: a, attempt: 1, runnerId: 'rnr_named' }, { stepId: b, attempt: 1, runnerId: 'rnr_unregistered' }]);
      await orchestratorHooks.stepStarted(client, { stepId: c, attempt: 1, runnerId: 'rnr_named' });
      (client as unknown as { query: unknown }).query = original;
    });
    expect(sent).toHaveLength(2);
    expect((await pool.query(`SELECT count(*)::int AS n FROM step_logs WHERE step_id = ANY($1::bigint[])`, [[a, b, c]])).rows[0].n).toBe(0);
    // The runner's registered name, or its id when it has none.
    expect((await stepLogRead(pool, { runId: run })).map((l) => `${l.step} ${l.attempt} ${l.stream} ${l.text}`).sort()).toEqual([
      'a 1 system attempt 1 started on runner build-05',
      'b 1 system attempt 1 started on runner rnr_unregistered',
      'c 1 system attempt 1 started on runner build-05',
    ]);
  });

  it('a requeued attempt comes back as the next attempt with a log line; stale hooks are ignored', async () => {
    const pool = db.current.pool;
    const run = await submit('name: rq\nsteps:\n  a: { run: echo a }\n');
    const a = await deliver(pool, { run, step: 'a' });
    await withTransaction(pool, async (client) => {
      const { rows } = await client.query(`DELETE FROM step_leases WHERE step_id = $1 RETURNING *`, [a.stepId]);
      await client.query(
        `INSERT INTO queue_ready (step_id, run_id, shard, attempt, priority, lane, fair_key, weight, pools, load, run_scope, max_parallel, ready_at, position)
         VALUES ($1, $2, $3, 2, 0, 2, 'default', 1, '{}', 1, false, 1, now(), $4)`,
        [a.stepId, run, rows[0].shard, rows[0].position],
      );
      await orchestratorHooks.stepRequeued(client, { stepId: a.stepId, fromAttempt: 1, toAttempt: 2, reason: 'offer not acked by its deadline' });
      // A second report of the same requeue is stale.
      await orchestratorHooks.stepRequeued(client, { stepId: a.stepId, fromAttempt: 1, toAttempt: 2, reason: 'again' });
      await orchestratorHooks.stepStarted(client, { stepId: a.stepId, attempt: 1, runnerId: 'rnr_stale' });
    });
    expect(await stepStates(pool, run)).toEqual({ a: 'ready/2' });
    const lines = (await stepLogRead(pool, { runId: run })).map((l) => l.text);
    expect(lines).toEqual(['attempt 1 started on runner rnr_test', 'attempt 1 back to the queue as attempt 2: offer not acked by its deadline']);
    const again = await deliver(pool, { run, step: 'a' });
    expect(again.attempt).toBe(2);
    await complete(pool, again, { status: 'succeeded' });
    expect((await runState(pool, run)).status).toBe('succeeded');
  });

  it('a lost pinned runner fails the run with a cause naming it; retry starts it again', async () => {
    const pool = db.current.pool;
    await registerRunner(pool, 'rnr_pin', 'build-07');
    const run = await submit('name: pinned\nscope: run\nsteps:\n  a: { run: sleep 100 }\n  b: { run: echo b }\n  c: { run: echo c, needs: [a] }\n');
    const a = await deliver(pool, { run, step: 'a', runnerId: 'rnr_pin' });
    await pool.query(`INSERT INTO run_pins (run_id, runner_id) VALUES ($1, 'rnr_pin')`, [run]);
    await complete(pool, a, { status: 'system_error', cause: 'runner lost: lease expired without a result', runnerId: 'rnr_pin', event: 'pinned_runner_lost' });
    expect(await runState(pool, run)).toEqual({ status: 'error', cause: 'pinned runner build-07 (rnr_pin) lost: the run cannot continue on another runner', finished: true });
    expect(await stepStates(pool, run)).toEqual({ a: 'system_error/1', b: 'skipped/1', c: 'skipped/0' });
    expect(await queued(pool, run)).toEqual([]);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM run_pins WHERE run_id = $1`, [run]);
    expect(rows[0].n).toBe(0);

    expect(await runRetry(pool, run, { actor: 'test' })).toEqual({ id: run, status: 'running', retried: [{ name: 'a', attempt: 2 }, { name: 'b', attempt: 2 }], reopened: ['c'] });
    expect(await queued(pool, run)).toEqual([['a', 2], ['b', 2]]);
  });

  it('a queue row takes its project\'s weight and the longest binding over the target', async () => {
    const pool = db.current.pool;
    await pool.query(`INSERT INTO projects (name, weight) VALUES ('acme', 3)`);
    await pool.query(`INSERT INTO placement_bindings (path, requirement) VALUES ('acme', '{"group": "build"}'), ('acme/prod', '{"selectors": {"location": ["dc1"]}}'), ('acme/prodx', '{"group": "wrong"}')`);
    const run = await submit('name: cls\nproject: acme\ntarget: acme/prod/web\npriority: 60\nsteps:\n  a: { run: echo a, pools: [db, api], load: 0.5 }\n  b: { run: echo b, placement: { labels: [gpu] }, priority: 120 }\n');
    const { rows } = await pool.query(
      `SELECT s.name, q.priority, q.lane, q.fair_key, q.weight, q.pools, q.requirement, q.load, q.site_stamp FROM queue_ready q JOIN steps s ON s.id = q.step_id WHERE q.run_id = $1 ORDER BY s.name`,
      [run],
    );
    expect(rows).toEqual([
      { name: 'a', priority: 60, lane: 1, fair_key: 'acme', weight: 3, pools: ['api', 'db'], requirement: { selectors: { location: ['dc1'] } }, load: 0.5, site_stamp: 'dc1' },
      // No pools is stored as NULL (an empty array would cost the row 13 B).
      { name: 'b', priority: 120, lane: 0, fair_key: 'acme', weight: 3, pools: null, requirement: { labels: ['gpu'] }, load: 1, site_stamp: null },
    ]);
  });

  it('freed steps take the weight their project has at enqueue; only steps a binding may place read the bindings', async () => {
    const pool = db.current.pool;
    await pool.query(`INSERT INTO placement_bindings (path, requirement) VALUES ('beta', '{"group": "build"}'), ('beta/prod', '{"group": "prod"}')`);
    const targeted = await submit('name: t\nproject: beta\ntarget: beta/prod/web\nsteps:\n  a: { run: echo a }\n  b: { run: echo b, needs: [a] }\n  c: { run: echo c, needs: [a], placement: { labels: [gpu] } }\n');
    const plain = await submit('name: p\nproject: beta\nsteps:\n  a: { run: echo a }\n  b: { run: echo b, needs: [a] }\n');
    // Set after the submits: the freed steps' rows take the weight as it is when they are queued.
    await pool.query(`INSERT INTO projects (name, weight) VALUES ('beta', 4)`);
    const freed = async (run: number) => (await runSteps(pool, run)).filter((s) => s.name !== 'a');
    const sent: string[] = [];
    const enqueue = (run: number) =>
      withTransaction(pool, async (client) => {
        const steps = await freed(run);
        const original = client.query.bind(client) as (...x: unknown[]) => unknown;
        (client as unknown as { query: (...x: unknown[]) => unknown }).query = (...args: unknown[]) => {
          const q = args[0] as string | { text: string };
          sent.push(typeof q === 'string' ? q : q.text);
          return original(...args);
        };
        try {
          return await enqueueFreedSteps(client, steps);
        } finally {
          (client as unknown as { query: unknown }).query = original;
        }
      });
    expect(await enqueue(plain)).toHaveLength(1);
    // The runs read and the enqueue: no bindings read for a run without a target.
    expect(sent).toHaveLength(2);
    expect(sent.some((q) => q.includes('placement_bindings'))).toBe(false);
    sent.length = 0;
    expect(await enqueue(targeted)).toHaveLength(2);
    expect(sent).toHaveLength(3);
    expect(sent.filter((q) => q.includes('placement_bindings'))).toHaveLength(1);
    const { rows } = await pool.query(
      `SELECT s.run_id::int AS run, s.name, q.weight, q.requirement FROM queue_ready q JOIN steps s ON s.id = q.step_id WHERE s.run_id = ANY($1::bigint[]) AND s.name <> 'a' ORDER BY s.run_id, s.name`,
      [[targeted, plain]],
    );
    expect(rows).toEqual([
      { run: targeted, name: 'b', weight: 4, requirement: { group: 'prod' } },
      { run: targeted, name: 'c', weight: 4, requirement: { labels: ['gpu'] } },
      { run: plain, name: 'b', weight: 4, requirement: null },
    ]);
  });
});
