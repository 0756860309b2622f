import { NotFound } from '../errors.js';
import { auditRecord } from '../store/audit.js';
import { leaseRevokeRun } from '../store/lease-revoke.js';
import { stepLogSystem } from '../store/logs.js';
import { withTransaction, type Pool } from '../store/pool.js';
import { queueRemoveRun } from '../store/queue.js';
import { runGet, runLock, runsFinish, stepsCloseWaiting, stepsLockRun, type RunStatus } from '../store/runs.js';
import { traceUnsentMarkCancelled } from '../store/traces.js';

export interface RunCancelled {
  id: number;
  /** The run's status after the call (`cancelled`, or the final status it already had). */
  status: RunStatus;
  /** False when the run had already finished: nothing changed. */
  cancelled: boolean;
  /** Steps that were pending, ready or running and are now cancelled. */
  steps: string[];
  /** Live leases revoked: each holding runner is notified and kills the step's process group at once. */
  revoked: number;
}

/**
 * Cancels a running run in one transaction: its ready entries leave the queue, its live leases
 * and their pool holds are revoked, every step not yet finished is cancelled, the run ends
 * `cancelled` and its pin goes. Cancelling a finished run changes nothing and says so.
 */
export async function runCancel(pool: Pool, runId: number, opts: { actor: string; source?: string } = { actor: 'cli' }): Promise<RunCancelled> {
  return withTransaction(pool, async (client) => {
    const seen = await runGet(client, runId);
    if (!seen) throw new NotFound(`no run with id ${runId}`);
    if (seen.status !== 'running') return { id: runId, status: seen.status, cancelled: false, steps: [], revoked: 0 };
    // Leases, queue entries and steps before the run row, the order every writer of a run's rows
    // takes them in: the lease lifecycle holds a lease row and its step when it takes the run's
    // lock, and a retry locks the run's steps before the run.
    const revoked = await leaseRevokeRun(client, runId);
    await queueRemoveRun(client, runId);
    await stepsLockRun(client, runId);
    const run = await runLock(client, runId);
    if (!run || run.status !== 'running') return { id: runId, status: run?.status ?? seen.status, cancelled: false, steps: [], revoked: revoked.length };
    const cause = `cancelled by ${opts.actor}`;
    const steps = await stepsCloseWaiting(client, { runId, status: 'cancelled', cause, includeRunning: true });
    // A delivery that claimed one of the run's entries before the first revoke commits while this
    // transaction waits on its rows (the queue entry, then the step row closed just above): its
    // lease is visible only now. Revoke again, or a cancelled run's step would run to the end.
    revoked.push(...(await leaseRevokeRun(client, runId)));
    await queueRemoveRun(client, runId);
    for (const s of steps) if (s.wasRunning) await stepLogSystem(client, { stepId: s.id, attempt: s.attempt, text: `${cause}; the runner was told to stop` });
    await runsFinish(client, { runIds: [runId], override: { status: 'cancelled', cause } });
    // Whoever cancels may export nothing (a CLI on the store): a replica with traces on sends its
    // spans, from the facts recorded here, so a retry right after cannot erase this round's.
    await traceUnsentMarkCancelled(client, runId);
    await auditRecord(client, { actor: opts.actor, action: 'runs.cancel', target: `run:${runId}`, source: opts.source, detail: { steps: steps.map((s) => s.name), revoked: revoked.length } });
    return { id: runId, status: 'cancelled', cancelled: true, steps: steps.map((s) => s.name), revoked: revoked.length };
  });
}
