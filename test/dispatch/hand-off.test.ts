import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Dispatcher } from '../../src/dispatch/dispatcher.js';
import type { Offer } from '../../src/dispatch/offers.js';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import { createPool, withTransaction, type Pool } from '../../src/store/pool.js';
import { postureSet } from '../../src/store/posture.js';
import { mapRunner, type RunnerRow } from '../../src/store/runners.js';
import { useTestDatabase } from '../support/db.js';
import { countClaims } from '../support/claim-count.js';
import { testDispatchDeps } from '../support/lifecycle.js';

const chain = (b: string) =>
  runFileLoad(`
name: chain
steps:
  a: { run: "true" }
  b: { run: "true", needs: [a]${b} }
`);

describe('steps freed by completions, handed to parked calls in the completion transaction', () => {
  const db = useTestDatabase();
  let pool: Pool;
  let deps: Dispatcher;
  let runners: RunnerRow[];
  let seen: { claims: number };

  beforeAll(async () => {
    pool = createPool(db.current.url, { max: 4 });
    seen = countClaims(pool);
    for (const id of ['rnr_h1', 'rnr_h2']) {
      await db.current.pool.query(`INSERT INTO runners (id, name, max_load, max_parallel_steps, credential_hash) VALUES ($1, $1, 4, 4, $2)`, [id, `hash-${id}`]);
    }
    runners = (await db.current.pool.query(`SELECT * FROM runners ORDER BY id`)).rows.map(mapRunner);
  });
  afterAll(async () => pool.end());
  beforeEach(async () => {
    // A dispatcher of its own per case: its sighting of the queue and its parked calls start
    // afresh. Its clock stands still, so a sighting of an empty queue holds however slow the
    // machine (only a change voids it).
    deps = testDispatchDeps(pool, { replicaId: 'replica-hand-off', now: () => 1_000 });
    await db.current.pool.query(`DELETE FROM queue_ready`);
    await db.current.pool.query(`UPDATE runners SET drained = false`);
    await withTransaction(db.current.pool, (c) => postureSet(c, { field: 'quiesced', value: false, reason: null, actor: 'test' }));
  });

  const park = (runner: RunnerRow, slots = 1) => deps.registry.park({ runner, requestId: `${runner.id}-${Math.random()}`, slots, onlyRunId: null, parkedAt: Date.now() }, 30_000);

  /** Step a delivered to rnr_h1 by a pass that took everything due (the queue is known empty after it); rnr_h2 parked. */
  async function started(b = '') {
    const { runId } = await runSubmit(db.current.pool, chain(b), { actor: 'test' });
    // Two slots: a claim that comes back short shows the tick took everything due.
    const first = park(runners[0], 2);
    expect(await deps.pass()).toMatchObject({ delivered: 1, tookAll: true });
    const [a] = await first.offers;
    expect(a.step).toBe('a');
    const second = park(runners[1]);
    return { runId, a, second };
  }

  const completeA = (a: Offer) => deps.groupCommit.complete([{ stepId: a.step_id, token: String(a.token), runnerId: runners[0].id, exitCode: 0, cause: null }]);

  async function stepB(runId: number) {
    const { rows } = await db.current.pool.query(
      `SELECT b.status, b.runner_id, b.started_at = a.finished_at AS same_transaction,
              (SELECT count(*)::int FROM queue_ready q WHERE q.step_id = b.id) AS queued,
              (SELECT l.ack_deadline IS NOT NULL AND l.delivered_at IS NOT NULL FROM step_leases l WHERE l.step_id = b.id) AS delivered
         FROM steps b JOIN steps a ON a.run_id = b.run_id AND a.name = 'a' WHERE b.run_id = $1 AND b.name = 'b'`,
      [runId],
    );
    return rows[0];
  }

  it('the completion that frees a step leases it to a parked call, with a token and an ack deadline, in its own transaction and without a claim', async () => {
    const { runId, a, second } = await started();
    const claims = seen.claims;
    await completeA(a);
    // Answered by the time the completion is: no tick ran (nothing here kicks one).
    expect(second.acquire.settled).toBe(true);
    const [b] = await second.offers;
    expect(b).toMatchObject({ run_id: runId, step: 'b' });
    expect(b.token).toBeTruthy();
    expect(await stepB(runId)).toEqual({ status: 'running', runner_id: 'rnr_h2', same_transaction: true, queued: 0, delivered: true });
    expect(seen.claims).toBe(claims);
  });

  it('a fleet held by a posture gets nothing: the freed step is queued for the ticks', async () => {
    const { runId, a, second } = await started();
    await withTransaction(db.current.pool, (c) => postureSet(c, { field: 'quiesced', value: true, reason: 'test', actor: 'test' }));
    await completeA(a);
    expect(second.acquire.settled).toBe(false);
    expect(await stepB(runId)).toMatchObject({ status: 'ready', queued: 1, delivered: null });
    second.acquire.deliver([]);
  });

  it('a drained runner parked is never handed the freed step', async () => {
    const { runId, a, second } = await started();
    await db.current.pool.query(`UPDATE runners SET drained = true WHERE id = 'rnr_h2'`);
    await completeA(a);
    expect(second.acquire.settled).toBe(false);
    expect(await stepB(runId)).toMatchObject({ status: 'ready', queued: 1, delivered: null });
    second.acquire.deliver([]);
  });

  it('work of its lane queued earlier goes first: the freed step waits its turn in a tick', async () => {
    const { runId, a, second } = await started();
    const { runId: earlier } = await runSubmit(db.current.pool, runFileLoad(`name: earlier\nsteps:\n  x: { run: "true" }\n`), { actor: 'test' });
    // What the enqueue's notification does in a server: the sighting no longer holds.
    deps.queueChanged();
    await completeA(a);
    expect(second.acquire.settled).toBe(false);
    expect(await stepB(runId)).toMatchObject({ status: 'ready', queued: 1 });
    // The tick delivers in its order: the entry queued earlier first.
    const claims = seen.claims;
    expect(await deps.tick()).toMatchObject({ delivered: 1 });
    expect(seen.claims).toBeGreaterThan(claims);
    expect((await second.offers).map((o) => [o.run_id, o.step])).toEqual([[earlier, 'x']]);
  });

  it('with no sighting of the queue, a queue holding nothing else due is read in the transaction and the step handed off', async () => {
    const { runId, a, second } = await started();
    deps.queueChanged();
    const claims = seen.claims;
    await completeA(a);
    expect(second.acquire.settled).toBe(true);
    expect((await second.offers).map((o) => o.step)).toEqual(['b']);
    expect(await stepB(runId)).toMatchObject({ status: 'running', runner_id: 'rnr_h2', same_transaction: true, queued: 0 });
    expect(seen.claims).toBe(claims);
  });

  it('a step in a pool is left to the ticks, which take its hold', async () => {
    const { runId, a, second } = await started(', pools: [db]');
    await completeA(a);
    expect(second.acquire.settled).toBe(false);
    expect(await stepB(runId)).toMatchObject({ status: 'ready', queued: 1 });
    expect(await deps.tick()).toMatchObject({ delivered: 1 });
    expect((await second.offers).map((o) => o.step)).toEqual(['b']);
  });
});
