import { classify } from '../core/classify.js';
import { shardOf } from '../core/fnv.js';
import { classificationInputs, type ClassificationInputs } from '../store/classification.js';
import type { Pool, PoolClient } from '../store/pool.js';
import { runsInsertQueued, type RunToQueue } from '../store/runs.js';
import type { LoadedRunFile } from './runfile.js';

export interface RunSubmitted {
  runId: number;
  /** The steps queued at once (those with no needs), as attempt 1. */
  ready: string[];
}

/**
 * Starts a run from a validated run file: the run and its steps, every root step classified and
 * queued as attempt 1, and the audit row, written by one statement (atomic by itself: nothing is
 * written if any part fails). Two reads come first: the run's id (its shard) and the
 * classification inputs of its project and target.
 */
export async function runSubmit(pool: Pool, file: LoadedRunFile, opts: { actor: string; source?: string }): Promise<RunSubmitted> {
  const [submitted] = await runSubmitMany(pool, [file], opts);
  return submitted;
}

/** runSubmit inside the caller's transaction (the launch loop creates a run and settles its launch together). */
export async function runSubmitIn(client: PoolClient, file: LoadedRunFile, opts: { actor: string; source?: string }): Promise<RunSubmitted> {
  const [submitted] = await runSubmitMany(client, [file], opts);
  return submitted;
}

/**
 * Starts many runs in one statement (all or none), as runSubmit does each: one read of run ids,
 * one read of classification inputs per distinct project and target, one write.
 */
export async function runSubmitMany(pool: Pool | PoolClient, files: LoadedRunFile[], opts: { actor: string; source?: string }): Promise<RunSubmitted[]> {
  if (files.length === 0) return [];
  // The first run's project and target are read with the run ids, in one round trip.
  const head = files[0].definition;
  const first = await classificationInputs(pool, { project: head.project, target: head.target, runIds: files.length });
  const ids = first.runIds;
  const inputs = new Map<string, Promise<ClassificationInputs>>([[JSON.stringify([head.project, head.target]), Promise.resolve(first)]]);
  const inputsFor = (project: string, target: string | null) => {
    const key = JSON.stringify([project, target]);
    if (!inputs.has(key)) inputs.set(key, classificationInputs(pool, { project, target }));
    return inputs.get(key)!;
  };
  const runs: RunToQueue[] = await Promise.all(
    files.map(async (file, i) => {
      const d = file.definition;
      const id = ids[i];
      const input = await inputsFor(d.project, d.target);
      const runInput = { project: d.project, priority: d.priority, scope: d.scope, maxParallelSteps: d.maxParallelSteps, placement: d.placement, target: d.target };
      const queue = new Map(
        d.steps
          .filter((s) => s.needs.length === 0)
          .map((s) => [s.name, { shard: shardOf(id), ...classify({ run: runInput, step: { priority: s.priority, placement: s.placement, pools: s.pools, load: s.load }, ...input }) }]),
      );
      return {
        id,
        definition: d,
        source: file.source,
        createdBy: opts.actor,
        queue,
        audit: { actor: opts.actor, action: 'runs.submit', target: `run:${id}`, source: opts.source ?? null, detail: { name: d.name, project: d.project, steps: d.steps.length } },
      };
    }),
  );
  const queued = await runsInsertQueued(pool, runs);
  return runs.map((r) => ({ runId: r.id, ready: queued.get(r.id) ?? [] }));
}
