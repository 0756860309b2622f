import { classify } from '../core/classify.js';
import { classificationInputs, classificationKey } from '../store/classification.js';
import type { PoolClient } from '../store/pool.js';
import { queueEnqueue } from '../store/queue.js';
import { runsGet, type RunRow, type StepRow } from '../store/runs.js';

/**
 * Classifies ready steps of one run (at their current attempt) and puts them on the queue.
 * Idempotent per (step, attempt) through queueEnqueue; returns the step ids actually queued.
 */
export async function enqueueReadySteps(client: PoolClient, run: RunRow, steps: StepRow[]): Promise<number[]> {
  return enqueueSteps(client, [run], steps);
}

/**
 * Ready steps of any number of runs (those a group of completions freed): the runs read once,
 * their classification inputs in one read, one enqueue statement for all.
 */
export async function enqueueFreedSteps(client: PoolClient, steps: StepRow[]): Promise<number[]> {
  if (steps.length === 0) return [];
  return enqueueSteps(client, await runsGet(client, [...new Set(steps.map((s) => s.runId))]), steps);
}

async function enqueueSteps(client: PoolClient, runs: RunRow[], steps: StepRow[]): Promise<number[]> {
  if (steps.length === 0) return [];
  const byId = new Map(runs.map((r) => [r.id, r]));
  const inputs = await classificationInputs(client, runs);
  const items = [];
  for (const s of steps) {
    const run = byId.get(s.runId);
    if (!run) continue;
    const runInput = { project: run.project, priority: run.priority, scope: run.scope, maxParallelSteps: run.maxParallelSteps, placement: run.placement, target: run.target };
    items.push({
      stepId: s.id,
      runId: run.id,
      attempt: s.attempt,
      ...classify({ run: runInput, step: { priority: s.priority, placement: s.placement, pools: s.pools, load: s.load }, ...inputs.get(classificationKey(run))! }),
    });
  }
  return queueEnqueue(client, items);
}
