import { NotFound } from '../errors.js';
import { auditRecord } from '../store/audit.js';
import { stepLogsStartedKeep, stepLogSystem } from '../store/logs.js';
import { withTransaction, type Pool } from '../store/pool.js';
import { runLock, runReopen, stepsLockRun, stepsRelease, stepsRetry, type RunStatus } from '../store/runs.js';
import { enqueueReadySteps } from './enqueue.js';

export interface RunRetried {
  id: number;
  /** The run's status after the call: running when something re-entered. */
  status: RunStatus;
  /** Steps that re-entered the queue, with their new attempt. */
  retried: Array<{ name: string; attempt: number }>;
  /** Skipped or cancelled steps back to pending, to follow once what they need succeeds. */
  reopened: string[];
}

/**
 * Every failed or system_error step re-enters as a new attempt and the run runs again; skipped
 * and cancelled steps go back to pending and follow (those that need nothing unfinished re-enter
 * at once). A run with nothing failed or cancelled is left as it is (not an error), so retrying
 * twice is the same as retrying once.
 */
export async function runRetry(pool: Pool, runId: number, opts: { actor: string; source?: string } = { actor: 'cli' }): Promise<RunRetried> {
  return withTransaction(pool, async (client) => {
    await stepsLockRun(client, runId);
    const run = await runLock(client, runId);
    if (!run) throw new NotFound(`no run with id ${runId}`);
    const { retried, reopened, ended } = await stepsRetry(client, runId);
    if (retried.length === 0 && reopened.length === 0) return { id: runId, status: run.status, retried: [], reopened: [] };
    await stepLogsStartedKeep(client, ended);
    const freed = await stepsRelease(client, { runId });
    const entering = [...retried, ...freed].sort((a, b) => a.id - b.id);
    for (const s of entering) await stepLogSystem(client, { stepId: s.id, attempt: s.attempt, text: `retried by ${opts.actor} as attempt ${s.attempt}` });
    await enqueueReadySteps(client, run, entering);
    await runReopen(client, runId);
    await auditRecord(client, { actor: opts.actor, action: 'runs.retry', target: `run:${runId}`, source: opts.source, detail: { steps: entering.map((s) => s.name) } });
    return {
      id: runId,
      status: 'running',
      retried: entering.map((s) => ({ name: s.name, attempt: s.attempt })),
      reopened: reopened.filter((r) => !freed.some((f) => f.id === r.id)).map((r) => r.name),
    };
  });
}
