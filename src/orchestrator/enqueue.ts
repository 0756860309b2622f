import { classify, placementFromBinding } from '../core/classify.js';
import type { PoolClient } from '../store/pool.js';
import { placementBindingsOver } from '../store/placement.js';
import { queueEnqueue } from '../store/queue.js';
import { runsToClassify, type ReadyStep, type RunToClassify } from '../store/runs.js';

/**
 * Classifies ready steps of one run (at their current attempt) and puts them on the queue.
 * Idempotent per (step, attempt) through queueEnqueue; returns the step ids actually queued.
 */
export async function enqueueReadySteps(client: PoolClient, run: RunToClassify, steps: ReadyStep[]): Promise<number[]> {
  return enqueueSteps(client, [run], steps);
}

/**
 * Ready steps of any number of runs (those a group of completions freed): one enqueue statement
 * for all. Their runs as the release returned them, else read once.
 */
export async function enqueueFreedSteps(client: PoolClient, steps: ReadyStep[], runs?: RunToClassify[]): Promise<number[]> {
  if (steps.length === 0) return [];
  return enqueueSteps(client, runs ?? (await runsToClassify(client, [...new Set(steps.map((s) => s.runId))])), steps);
}

/** Only steps a path binding may place read the bindings, over their runs' targets, in one read. */
async function enqueueSteps(client: PoolClient, runs: RunToClassify[], steps: ReadyStep[]): Promise<number[]> {
  if (steps.length === 0) return [];
  const byId = new Map(runs.map((r) => [r.id, r]));
  const queued = steps.filter((s) => byId.has(s.runId));
  const targets = queued.flatMap((s) => {
    const run = byId.get(s.runId)!;
    return placementFromBinding(run, s) ? [run.target!] : [];
  });
  const bindings = await placementBindingsOver(client, targets);
  return queueEnqueue(
    client,
    queued.map((s) => {
      const run = byId.get(s.runId)!;
      return { stepId: s.id, runId: run.id, attempt: s.attempt, ...classify({ run, step: s, bindings: (run.target && bindings.get(run.target)) || [] }) };
    }),
  );
}
