import { randomBytes } from 'node:crypto';
import type { Pool } from '../../src/store/pool.js';

export interface RunnerFixture {
  id: string;
  name?: string;
  group?: string | null;
  labels?: string[];
  executors?: string[];
  maxLoad?: number;
  /** Its `--max-parallel-steps`; 4 unless given, so a fixture runner is bounded by its load. */
  maxParallelSteps?: number;
  state?: 'online' | 'watch' | 'offline';
  drained?: boolean;
}

/** Registers a runner row directly, as the registry would, for tests of placement and drains. */
export async function insertRunner(pool: Pool, r: RunnerFixture): Promise<void> {
  await pool.query(
    `INSERT INTO runners (id, name, group_name, labels, executors, max_load, credential_hash, state, drained, max_parallel_steps)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
    [r.id, r.name ?? r.id, r.group ?? null, r.labels ?? [], r.executors ?? ['shell'], r.maxLoad ?? 4, randomBytes(16).toString('hex'), r.state ?? 'online', r.drained ?? false, r.maxParallelSteps ?? 4],
  );
}

/** A live lease delivered to a runner, carrying a load, as the dispatcher would leave it. */
export async function insertLease(pool: Pool, l: { stepId: number; runId: number; runnerId: string | null; load?: number; pools?: string[]; holder?: string }): Promise<void> {
  await pool.query(
    `INSERT INTO step_leases (step_id, run_id, shard, attempt, load, pools, ready_at, enqueued_at, position, holder, runner_id, delivered_at, expires_at)
     VALUES ($1, $2, 0, 1, $3, $4, now(), now(), $1, $5, $6, CASE WHEN $6::text IS NULL THEN NULL ELSE now() END, now() + interval '3 minutes')`,
    [l.stepId, l.runId, l.load ?? 1, l.pools ?? [], l.holder ?? 'replica-test', l.runnerId],
  );
}
