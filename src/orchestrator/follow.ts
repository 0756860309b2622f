import { NotFound } from '../errors.js';
import type { Pool } from '../store/pool.js';
import { runRead, type RunRow, type StepRow } from '../store/runs.js';

export interface RunSnapshot { run: RunRow; steps: StepRow[]; now: Date }

/** The run as it stands; NotFoundError when there is no such run. */
export async function runSnapshot(pool: Pool, runId: number): Promise<RunSnapshot> {
  const snap = await runRead(pool, runId);
  if (!snap) throw new NotFound(`no run with id ${runId}`);
  return snap;
}
