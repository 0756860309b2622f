import type { Pool, PoolClient } from './pool.js';

type Db = Pool | PoolClient;

/** run id → pinned runner id, for the runs asked about. */
export async function runPinRead(db: Db, runIds: number[]): Promise<Map<number, string>> {
  if (runIds.length === 0) return new Map();
  const { rows } = await db.query(`SELECT run_id, runner_id FROM scheduler_run_pins WHERE run_id = ANY($1::bigint[])`, [[...new Set(runIds)]]);
  return new Map(rows.map((r) => [Number(r.run_id), r.runner_id as string]));
}

/**
 * Pins a run to a runner, before the delivery that pins it. A pin is never re-pointed: when the run
 * is already pinned (another replica won the race) the existing runner is returned, and the caller
 * must not deliver unless it is the runner it planned for.
 */
export async function runPinCreate(db: Db, p: { runId: number; runnerId: string }): Promise<string> {
  const { rows } = await db.query(
    `WITH ins AS (
       INSERT INTO scheduler_run_pins (run_id, runner_id) VALUES ($1, $2) ON CONFLICT (run_id) DO NOTHING RETURNING runner_id
     )
     SELECT runner_id FROM ins UNION ALL SELECT runner_id FROM scheduler_run_pins WHERE run_id = $1 LIMIT 1`,
    [p.runId, p.runnerId],
  );
  if (rows[0]) return rows[0].runner_id;
  // A racing pin committed after this statement's snapshot was taken: a fresh statement sees it.
  const again = await db.query(`SELECT runner_id FROM scheduler_run_pins WHERE run_id = $1`, [p.runId]);
  return again.rows[0].runner_id;
}

/** Removes a run's pin (the run finalised). */
export async function runPinDelete(db: Db, runIds: number[]): Promise<number> {
  if (runIds.length === 0) return 0;
  const { rowCount } = await db.query(`DELETE FROM scheduler_run_pins WHERE run_id = ANY($1::bigint[])`, [runIds]);
  return rowCount ?? 0;
}

/** run id → how many of its steps are delivered to a runner and not yet finished. */
export async function runOutstandingRead(db: Db, runIds: number[]): Promise<Map<number, number>> {
  if (runIds.length === 0) return new Map();
  const { rows } = await db.query(
    `SELECT run_id, count(*) AS n FROM scheduler_job_leases
      WHERE run_id = ANY($1::bigint[]) AND delivered_at IS NOT NULL GROUP BY run_id`,
    [[...new Set(runIds)]],
  );
  return new Map(rows.map((r) => [Number(r.run_id), Number(r.n)]));
}
