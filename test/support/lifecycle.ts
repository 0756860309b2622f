import { EventEmitter } from 'node:events';
import type { DispatcherOptions } from '../../src/dispatch/deps.js';
import { Dispatcher } from '../../src/dispatch/dispatcher.js';
import { createLogger } from '../../src/logger.js';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import { leaseReturn } from '../../src/store/leases.js';
import { withTransaction, type Pool } from '../../src/store/pool.js';

/**
 * The smallest stand-in for the lease lifecycle the hooks are called from: claim a ready entry
 * into a lease and deliver it, then complete it, each in one transaction with the hook inside.
 */
export async function deliver(pool: Pool, p: { run: number; step: string; runnerId?: string; pools?: string[]; batch?: boolean }): Promise<{ stepId: number; attempt: number }> {
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query(
      `WITH q AS (DELETE FROM queue_ready WHERE step_id = (SELECT id FROM steps WHERE run_id = $1 AND name = $2) RETURNING *)
       INSERT INTO step_leases (step_id, run_id, shard, attempt, priority, lane, fair_key, weight, pools, requirement, load,
                                         run_scope, max_parallel, site_stamp, ready_at, enqueued_at, position, holder, delivered_at, runner_id, expires_at)
       SELECT step_id, run_id, shard, attempt, priority, lane, fair_key, weight, pools, requirement, load, run_scope, max_parallel,
              site_stamp, ready_at, enqueued_at, position, 'test-replica', now(), $3, now() + interval '3 minutes' FROM q
       RETURNING step_id, attempt`,
      [p.run, p.step, p.runnerId ?? 'rnr_test'],
    );
    if (!rows[0]) throw new Error(`step ${p.step} of run ${p.run} is not on the queue`);
    const stepId = Number(rows[0].step_id);
    for (const pool of p.pools ?? []) await client.query(`INSERT INTO pool_holds (pool, step_id, attempt) VALUES ($1, $2, $3)`, [pool, stepId, rows[0].attempt]);
    const started = { stepId, attempt: rows[0].attempt, runnerId: p.runnerId ?? 'rnr_test' };
    // `batch`: through the dispatcher's hook (stepsStarted) rather than the single one.
    if (p.batch) await orchestratorHooks.stepsStarted(client, [started]);
    else await orchestratorHooks.stepStarted(client, started);
    return { stepId, attempt: rows[0].attempt };
  });
}

export async function complete(
  pool: Pool,
  lease: { stepId: number; attempt: number },
  outcome: { status: 'succeeded' | 'failed' | 'system_error'; exitCode?: number | null; cause?: string | null; runnerId?: string; event?: string },
): Promise<void> {
  await withTransaction(pool, async (client) => {
    await client.query(`DELETE FROM step_leases WHERE step_id = $1 AND attempt = $2`, [lease.stepId, lease.attempt]);
    await client.query(`DELETE FROM pool_holds WHERE step_id = $1`, [lease.stepId]);
    await client.query(`INSERT INTO completed_attempts (step_id, attempt) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [lease.stepId, lease.attempt]);
    await orchestratorHooks.stepFinished(client, {
      stepId: lease.stepId,
      attempt: lease.attempt,
      status: outcome.status,
      exitCode: outcome.exitCode === undefined ? (outcome.status === 'succeeded' ? 0 : outcome.status === 'failed' ? 1 : null) : outcome.exitCode,
      cause: outcome.cause ?? null,
      runnerId: outcome.runnerId ?? 'rnr_test',
      event: outcome.event ?? null,
    });
  });
}

/**
 * Puts the step's lease back on the queue as the lease lifecycle does: as the next attempt (a
 * release, an offer never acked) or, with `newAttempt: false`, as the same one (nothing external
 * saw it).
 */
export async function giveBack(pool: Pool, lease: { stepId: number }, p: { newAttempt: boolean; reason: string }): Promise<void> {
  await withTransaction(pool, async (client) => {
    const { rows } = await client.query(`SELECT token FROM step_leases WHERE step_id = $1`, [lease.stepId]);
    if (!rows[0]) throw new Error(`step ${lease.stepId} holds no lease`);
    for (const l of await leaseReturn(client, { items: [{ stepId: lease.stepId, token: String(rows[0].token) }], newAttempt: p.newAttempt })) {
      await orchestratorHooks.stepRequeued(client, { stepId: l.stepId, fromAttempt: l.attempt, toAttempt: l.attempt + (p.newAttempt ? 1 : 0), reason: p.reason });
    }
  });
}

/** Delivers and completes one step. */
export async function runStep(pool: Pool, run: number, step: string, status: 'succeeded' | 'failed' | 'system_error' = 'succeeded', cause?: string): Promise<void> {
  await complete(pool, await deliver(pool, { run, step }), { status, cause });
}

export async function queued(pool: Pool, run: number): Promise<Array<[string, number]>> {
  const { rows } = await pool.query(`SELECT s.name, q.attempt FROM queue_ready q JOIN steps s ON s.id = q.step_id WHERE q.run_id = $1 ORDER BY s.name`, [run]);
  return rows.map((r) => [r.name, r.attempt]);
}

export async function stepStates(pool: Pool, run: number): Promise<Record<string, string>> {
  const { rows } = await pool.query(`SELECT name, status, attempt FROM steps WHERE run_id = $1 ORDER BY id`, [run]);
  return Object.fromEntries(rows.map((r) => [r.name, `${r.status}/${r.attempt}`]));
}

export async function runState(pool: Pool, run: number): Promise<{ status: string; cause: string | null; finished: boolean }> {
  const { rows } = await pool.query(`SELECT status, cause, finished_at FROM runs WHERE id = $1`, [run]);
  return { status: rows[0].status, cause: rows[0].cause, finished: rows[0].finished_at !== null };
}

/** The token of the step's live lease (as text: it is a bigint). */
export async function leaseToken(pool: Pool, stepId: number): Promise<string> {
  const { rows } = await pool.query(`SELECT token FROM step_leases WHERE step_id = $1`, [stepId]);
  return String(rows[0].token);
}

export async function registerRunner(pool: Pool, id: string, name: string): Promise<void> {
  await pool.query(`INSERT INTO runners (id, name, credential_hash) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, [id, name, `hash-${id}`]);
}

/**
 * A replica's dispatcher with no server around it (every shard owned, a silent log, no loop to
 * kick): for ticks driven by hand and for the lease lifecycle calls.
 */
export function testDispatchDeps(pool: Pool, overrides: Partial<DispatcherOptions> = {}): Dispatcher {
  return new Dispatcher({
    pool,
    log: createLogger('silent', { pretty: false }),
    replicaId: 'test-replica',
    hooks: orchestratorHooks,
    ownedShards: () => Array.from({ length: 64 }, (_, i) => i),
    ttlMs: 60_000,
    acceptExceeding: false,
    events: new EventEmitter(),
    ...overrides,
  });
}

/**
 * The moment just past the latest lease's ack deadline or expiry, by the store's clock: handed to
 * the expiry sweep as its `now`, it moves time past the deadline without rewriting any row.
 */
export async function justPast(pool: Pool, column: 'ack_deadline' | 'expires_at'): Promise<Date> {
  const { rows } = await pool.query<{ t: Date | null }>(`SELECT max(${column}) + interval '1 millisecond' AS t FROM step_leases`);
  if (!rows[0].t) throw new Error(`no lease has a ${column}`);
  return rows[0].t;
}
