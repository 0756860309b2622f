import { classify } from '../core/classify.js';
import { classificationInputs } from '../store/classification.js';
import type { PoolClient } from '../store/pool.js';
import { queueEnqueue } from '../store/queue.js';
import type { RunRow, StepRow } from '../store/runs.js';

/**
 * Classifies ready steps of one run (at their current attempt) and puts them on the queue.
 * Idempotent per (step, attempt) through queueEnqueue; returns the step ids actually queued.
 */
export async function enqueueReadySteps(client: PoolClient, run: RunRow, steps: StepRow[]): Promise<number[]> {
  if (steps.length === 0) return [];
  const inputs = await classificationInputs(client, { project: run.project, target: run.target });
  const runInput = { project: run.project, priority: run.priority, scope: run.scope, maxParallelSteps: run.maxParallelSteps, placement: run.placement, target: run.target };
  return queueEnqueue(
    client,
    steps.map((s) => ({
      stepId: s.id,
      runId: run.id,
      attempt: s.attempt,
      ...classify({ run: runInput, step: { priority: s.priority, placement: s.placement, pools: s.pools, load: s.load }, ...inputs }),
    })),
  );
}
