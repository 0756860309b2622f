import { performance } from 'node:perf_hooks';
import { laneOf, type PlacementRequirement } from '../src/core/entry.js';
import { shardOf } from '../src/core/fnv.js';
import type { Pool } from '../src/store/pool.js';

/** Ready entries on the queue now. */
export async function readyCount(pool: Pool): Promise<number> {
  const { rows } = await pool.query(`SELECT count(*)::int AS n FROM queue_ready`);
  return rows[0].n;
}

const PROJECTS = 32;
const RUNS_PER_CHUNK = 10_000;

/**
 * Puts `entries` ready steps on the queue in bulk, shaped as submitted runs of `stepsPerRun`
 * independent steps at attempt 1 (runs, steps and queue rows in set-based statements), spread
 * over 32 projects and the three lanes. Far faster than submitting a million steps one run at a
 * time; the entries are indistinguishable from submitted ones to the dispatch plane.
 */
export async function prequeue(pool: Pool, p: { entries: number; stepsPerRun: number; label: string; requirement?: PlacementRequirement; progress?: (m: string) => void }): Promise<void> {
  const runs = Math.ceil(p.entries / p.stepsPerRun);
  const source = { name: p.label, steps: Object.fromEntries(Array.from({ length: p.stepsPerRun }, (_, k) => [`s${k}`, { run: 'true' }])) };
  const t0 = performance.now();
  let lastReport = t0;
  for (let done = 0; done < runs; done += RUNS_PER_CHUNK) {
    const n = Math.min(RUNS_PER_CHUNK, runs - done);
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query(
        `INSERT INTO runs (name, project, priority, definition, created_by)
         SELECT $1, 'proj-' || ((g + $3) % ${PROJECTS}), CASE WHEN (g + $3) % 10 = 0 THEN 100 WHEN (g + $3) % 10 < 3 THEN 50 ELSE 0 END, $2::jsonb, 'bench'
           FROM generate_series(0, $4 - 1) g
          ORDER BY g
         RETURNING id, project, priority`,
        [p.label, JSON.stringify(source), done, n],
      );
      const ids = rows.map((r) => Number(r.id));
      await client.query(
        `INSERT INTO steps (run_id, name, command, status, attempt)
         SELECT r.id, 's' || k, 'true', 'ready', 1 FROM unnest($1::bigint[]) AS r(id) CROSS JOIN generate_series(0, $2 - 1) AS k
          ORDER BY r.id, k`,
        [ids, p.stepsPerRun],
      );
      await client.query(
        `INSERT INTO queue_ready (step_id, run_id, shard, attempt, priority, lane, fair_key, requirement)
         SELECT s.id, s.run_id, m.shard, 1, m.priority, m.lane, m.project, $5::jsonb
           FROM unnest($1::bigint[], $2::smallint[], $3::smallint[], $4::text[], $6::smallint[]) AS m(run_id, shard, priority, project, lane)
           JOIN steps s ON s.run_id = m.run_id
          ORDER BY s.id`,
        [ids, ids.map((id) => shardOf(id)), rows.map((r) => r.priority), rows.map((r) => r.project), p.requirement ? JSON.stringify(p.requirement) : null, rows.map((r) => laneOf(r.priority))],
      );
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
    if (p.progress && performance.now() - lastReport > 5_000) {
      lastReport = performance.now();
      p.progress(`${p.label}: ${((done + n) * p.stepsPerRun).toLocaleString('en-US')} of ${(runs * p.stepsPerRun).toLocaleString('en-US')} entries queued`);
    }
  }
  // The bench cluster runs without autovacuum (see pg.ts): give the planner the new sizes.
  await pool.query('ANALYZE runs, steps, queue_ready');
}
