import { auditRecord } from '../store/audit.js';
import { withTransaction, type Pool, type PoolClient } from '../store/pool.js';
import { runInsert, stepsRelease } from '../store/runs.js';
import { enqueueReadySteps } from './enqueue.js';
import type { LoadedRunFile } from './runfile.js';

export interface RunSubmitted {
  runId: number;
  /** The steps queued at once (those with no needs), as attempt 1. */
  ready: string[];
}

/**
 * Starts a run from a validated run file, in one transaction: the run and its steps, every root
 * step classified and queued as attempt 1, and the audit row. Nothing is written if any part fails.
 */
export async function runSubmit(pool: Pool, file: LoadedRunFile, opts: { actor: string; source?: string }): Promise<RunSubmitted> {
  return withTransaction(pool, (client) => runSubmitIn(client, file, opts));
}

/** runSubmit inside the caller's transaction (the launch loop creates a run and settles its launch together). */
export async function runSubmitIn(client: PoolClient, file: LoadedRunFile, opts: { actor: string; source?: string }): Promise<RunSubmitted> {
  const { run } = await runInsert(client, { definition: file.definition, source: file.source, createdBy: opts.actor });
  const ready = await stepsRelease(client, { runId: run.id });
  await enqueueReadySteps(client, run, ready);
  await auditRecord(client, { actor: opts.actor, action: 'runs.submit', target: `run:${run.id}`, source: opts.source, detail: { name: run.name, project: run.project, steps: file.definition.steps.length } });
  return { runId: run.id, ready: ready.map((s) => s.name) };
}
