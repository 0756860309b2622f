import { queueRemoveRun } from '../store/queue.js';
import { leaseRevokeRun } from '../store/lease-revoke.js';
import { stepLogsStarted, stepLogStarted, stepLogSystem } from '../store/logs.js';
import type { PoolClient } from '../store/pool.js';
import {
  runCauseSet,
  runFinish,
  runLock,
  runnerName,
  runPinRemove,
  runProgress,
  stepFinish,
  stepGet,
  stepRequeue,
  stepsCloseWaiting,
  stepsRelease,
  stepsSkipDependents,
  stepsWithStatus,
  stepStart,
  stepsStart,
  stepsFinish,
  type RunRow,
} from '../store/runs.js';
import type { OrchestratorHooks, StepOutcome } from './contract.js';
import { enqueueReadySteps } from './enqueue.js';

/**
 * Ends the run once nothing of it is pending, ready or running: error if any step ended in
 * system_error, else failed if any failed, else cancelled if any was cancelled, else succeeded.
 * The run's pin goes with it.
 */
export async function runRollUp(client: PoolClient, run: RunRow): Promise<RunRow['status']> {
  if (run.status !== 'running') return run.status;
  const p = await runProgress(client, run.id);
  if (p.open > 0) return 'running';
  let status: Exclude<RunRow['status'], 'running'> = 'succeeded';
  let cause: string | null = null;
  if (p.firstSystemError) {
    status = 'error';
    cause = `step ${p.firstSystemError.name}: ${p.firstSystemError.cause ?? 'system error'}`;
  } else if (p.firstFailed) {
    status = 'failed';
    // The runner's own cause usually names the exit code already; say it once.
    const f = p.firstFailed;
    cause = f.cause ? `step ${f.name} failed: ${f.cause}` : `step ${f.name} failed${f.exitCode !== null ? ` with exit code ${f.exitCode}` : ''}`;
  } else if (p.counts.cancelled > 0) status = 'cancelled';
  await runFinish(client, { runId: run.id, status, cause });
  await runPinRemove(client, run.id);
  return status;
}

/**
 * A run-scoped run whose pinned runner is lost cannot go on (it is never re-pinned): every other
 * step still out is failed with the same cause, everything waiting is skipped, and the cause
 * names the runner.
 */
async function failPinnedRun(client: PoolClient, run: RunRow, runnerId: string): Promise<void> {
  const name = await runnerName(client, runnerId);
  const who = name === runnerId ? runnerId : `${name} (${runnerId})`;
  await runCauseSet(client, { runId: run.id, cause: `pinned runner ${who} lost: the run cannot continue on another runner` });
  await leaseRevokeRun(client, run.id);
  await queueRemoveRun(client, run.id);
  await stepsCloseWaiting(client, { runId: run.id, status: 'skipped', cause: `skipped: the run's pinned runner ${who} was lost` });
  // Steps still running were on the same (lost) runner; they end as the lost one did.
  for (const r of await stepsWithStatus(client, { runId: run.id, status: 'running' })) {
    const step = await stepFinish(client, { stepId: r.id, attempt: r.attempt, status: 'system_error', exitCode: null, cause: `runner lost: pinned runner ${who} lost`, runnerId: null, seal: true });
    if (step) await stepLogSystem(client, { stepId: step.id, attempt: step.attempt, text: `pinned runner ${who} lost; log sealed` });
  }
}

/**
 * Records outcomes run by run, in run-id order (one global lock order, so concurrent batches
 * never deadlock): each run is locked once, every outcome applied, then rolled up once.
 */
async function finishOutcomes(client: PoolClient, outcomes: StepOutcome[]): Promise<void> {
  const byRun = new Map<number, StepOutcome[]>();
  for (const o of outcomes) {
    const runId = o.runId ?? (await stepGet(client, o.stepId))?.runId;
    if (runId === undefined) continue;
    byRun.set(runId, [...(byRun.get(runId) ?? []), o]);
  }
  for (const runId of [...byRun.keys()].sort((a, b) => a - b)) {
    const run = await runLock(client, runId);
    if (!run) continue;
    const list = byRun.get(runId)!;
    const finished = await stepsFinish(
      client,
      list.map((o) => ({ stepId: o.stepId, attempt: o.attempt, status: o.status, exitCode: o.exitCode, cause: o.cause, runnerId: o.runnerId, seal: o.status === 'system_error' })),
    );
    // A stale attempt, a duplicate completion, or a step already cancelled is not among `finished`.
    const outcomeOf = new Map(list.map((o) => [o.stepId, o]));
    const succeeded = finished.filter((s) => s.status === 'succeeded').map((s) => s.name);
    if (succeeded.length > 0) await enqueueReadySteps(client, run, await stepsRelease(client, { runId: run.id, after: succeeded }));
    for (const step of finished.filter((s) => s.status !== 'succeeded')) {
      const o = outcomeOf.get(step.id)!;
      if (step.status === 'system_error') await stepLogSystem(client, { stepId: step.id, attempt: step.attempt, text: `attempt ${step.attempt} ended in system_error: ${o.cause ?? 'unknown cause'}; log sealed` });
      await stepsSkipDependents(client, { runId: run.id, stepName: step.name, cause: `skipped: step ${step.name} ${step.status === 'failed' ? 'failed' : 'ended in system_error'}` });
      if (o.event === 'pinned_runner_lost' && o.runnerId) await failPinnedRun(client, run, o.runnerId);
    }
    await runRollUp(client, run);
  }
}

export const orchestratorHooks: OrchestratorHooks = {
  async stepStarted(client, p) {
    if (await stepStart(client, p)) await stepLogStarted(client, p);
  },

  async stepFinished(client, o: StepOutcome) {
    await finishOutcomes(client, [o]);
  },

  async stepsStarted(client, items) {
    const started = await stepsStart(client, items);
    await stepLogsStarted(client, started);
  },

  async stepsFinished(client, outcomes) {
    await finishOutcomes(client, outcomes);
  },

  async stepRequeued(client, p) {
    const step = await stepRequeue(client, p);
    if (!step) return;
    await stepLogSystem(client, { stepId: step.id, attempt: p.fromAttempt, text: `attempt ${p.fromAttempt} back to the queue as attempt ${p.toAttempt}: ${p.reason}` });
  },
};
