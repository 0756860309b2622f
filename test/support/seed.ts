import { classify } from '../../src/core/classify.js';
import type { PlacementRequirement } from '../../src/core/entry.js';
import type { Pool } from '../../src/store/pool.js';
import { queueEnqueue } from '../../src/store/queue.js';

export interface SeedStep { name: string; command?: string; env?: Record<string, string>; load?: number; pools?: string[]; priority?: number; placement?: PlacementRequirement }

/**
 * Inserts a run with independent steps and enqueues them at attempt 1, bypassing the run-file
 * front end: for tests of the dispatch plane itself.
 */
export async function seedRun(pool: Pool, p: { steps: SeedStep[]; project?: string; priority?: number; scope?: 'step' | 'run'; maxParallelSteps?: number; env?: Record<string, string>; placement?: PlacementRequirement }): Promise<{ runId: number; stepIds: number[] }> {
  const { rows: run } = await pool.query(
    `INSERT INTO runs (name, project, scope, max_parallel_steps, priority, env, definition) VALUES ('seed', $1, $2, $3, $4, $5, '{}') RETURNING id`,
    [p.project ?? 'default', p.scope ?? 'step', p.maxParallelSteps ?? 1, p.priority ?? 0, JSON.stringify(p.env ?? {})],
  );
  const runId = Number(run[0].id);
  const stepIds: number[] = [];
  for (const s of p.steps) {
    const { rows } = await pool.query(
      `INSERT INTO steps (run_id, name, command, env, load, pools, priority, status, attempt) VALUES ($1, $2, $3, $4, $5, $6, $7, 'ready', 1) RETURNING id`,
      [runId, s.name, s.command ?? 'true', JSON.stringify(s.env ?? {}), s.load ?? 1, s.pools ?? [], s.priority ?? null],
    );
    stepIds.push(Number(rows[0].id));
  }
  await pool.query(`UPDATE runs SET open_steps = $2 WHERE id = $1`, [runId, p.steps.length]);
  await queueEnqueue(
    pool,
    p.steps.map((s, i) => ({
      stepId: stepIds[i],
      runId,
      attempt: 1,
      ...classify({
        run: { project: p.project ?? 'default', priority: p.priority ?? 0, scope: p.scope ?? 'step', maxParallelSteps: p.maxParallelSteps ?? 1, placement: p.placement ?? null, target: null },
        step: { priority: s.priority ?? null, placement: s.placement ?? null, pools: s.pools ?? [], load: s.load ?? 1 },
        bindings: [],
      }),
    })),
  );
  return { runId, stepIds };
}
