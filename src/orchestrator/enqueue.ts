import { classify, placementFromBinding } from '../core/classify.js';
import type { QueueEntry } from '../core/entry.js';
import type { PoolClient } from '../store/pool.js';
import { placementBindingsOver } from '../store/placement.js';
import { queueEnqueue, queueEnqueueQuiet, queueNotify } from '../store/queue.js';
import type { FreedOffer } from './contract.js';
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
export async function enqueueFreedSteps(client: PoolClient, steps: ReadyStep[], runs?: RunToClassify[], offer?: FreedOffer): Promise<number[]> {
  if (steps.length === 0) return [];
  const known = runs ?? (await runsToClassify(client, [...new Set(steps.map((s) => s.runId))]));
  if (!offer) return enqueueSteps(client, known, steps);
  // Queued without a notification, offered, and announced only if some are left: a step leased
  // here never wakes a dispatcher (this replica's included) to claim what is no longer there.
  const queued = await enqueueSteps(client, known, steps, true);
  const leased = queued.length > 0 ? await offer(client, queued) : new Set<number>();
  if (queued.some((e) => !leased.has(e.stepId))) await queueNotify(client);
  return queued.map((e) => e.stepId);
}

/** Only steps a path binding may place read the bindings, over their runs' targets, in one read. */
async function enqueueSteps(client: PoolClient, runs: RunToClassify[], steps: ReadyStep[]): Promise<number[]>;
async function enqueueSteps(client: PoolClient, runs: RunToClassify[], steps: ReadyStep[], quiet: true): Promise<QueueEntry[]>;
async function enqueueSteps(client: PoolClient, runs: RunToClassify[], steps: ReadyStep[], quiet = false): Promise<number[] | QueueEntry[]> {
  if (steps.length === 0) return [];
  const byId = new Map(runs.map((r) => [r.id, r]));
  const queued = steps.filter((s) => byId.has(s.runId));
  const targets = queued.flatMap((s) => {
    const run = byId.get(s.runId)!;
    return placementFromBinding(run, s) ? [run.target!] : [];
  });
  const bindings = await placementBindingsOver(client, targets);
  const items = queued.map((s) => {
    const run = byId.get(s.runId)!;
    return { stepId: s.id, runId: run.id, attempt: s.attempt, ...classify({ run, step: s, bindings: (run.target && bindings.get(run.target)) || [] }) };
  });
  return quiet ? queueEnqueueQuiet(client, items) : queueEnqueue(client, items);
}
