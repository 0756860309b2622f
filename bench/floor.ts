import { performance } from 'node:perf_hooks';
import { createPool } from '../src/store/pool.js';
import type { Sizes } from './args.js';
import { checkpoint, costDelta, costSnapshot, type BenchPostgres, type CostDelta } from './pg.js';
import { perSecond } from './stats.js';

export interface FloorResult { jobs: number; ms: number; jobsPerSecond: number; addCost: CostDelta; drainCost: CostDelta }

/**
 * The physical floor: what this PostgreSQL can do at all for a queue. N rows inserted in one
 * statement, then W connections loop: claim `floorClaim` rows with SKIP LOCKED (mark them taken),
 * then delete them ("complete"), each statement its own transaction. No HTTP, no fencing, no run
 * bookkeeping: every figure of opschain and graphile-worker is shown against it.
 */
export async function floorDrain(pg: BenchPostgres, db: { name: string; url: string }, n: number, sizes: Sizes): Promise<FloorResult> {
  const pool = createPool(db.url, { max: sizes.floorWorkers + 1, applicationName: 'opschain-bench-floor', statementTimeoutMs: 600_000, queryTimeoutMs: 600_000 });
  try {
    await pool.query(`CREATE TABLE floor_jobs (id bigserial PRIMARY KEY, payload jsonb NOT NULL, taken_at timestamptz)`);
    await checkpoint(pg);
    const c0 = await costSnapshot(pg, db.name);
    await pool.query(`INSERT INTO floor_jobs (payload) SELECT jsonb_build_object('i', i) FROM generate_series(1, $1) AS i`, [n]);
    await pool.query('ANALYZE floor_jobs');
    const c1 = await costSnapshot(pg, db.name);
    let done = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: sizes.floorWorkers }, async () => {
        for (;;) {
          const { rows } = await pool.query(
            `UPDATE floor_jobs SET taken_at = now()
              WHERE id IN (SELECT id FROM floor_jobs WHERE taken_at IS NULL ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
             RETURNING id`,
            [sizes.floorClaim],
          );
          if (rows.length === 0) return;
          await pool.query(`DELETE FROM floor_jobs WHERE id = ANY($1::bigint[])`, [rows.map((r) => r.id)]);
          done += rows.length;
        }
      }),
    );
    const ms = performance.now() - t0;
    if (done !== n) throw new Error(`floor: ${done} jobs completed, expected ${n}`);
    const c2 = await costSnapshot(pg, db.name);
    return { jobs: n, ms, jobsPerSecond: perSecond(n, ms), addCost: costDelta(c0, c1), drainCost: costDelta(c1, c2) };
  } finally {
    await pool.end().catch(() => {});
  }
}
