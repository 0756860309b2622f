import { queueRemoveRun } from '../store/queue.js';
import { leaseRevokeRun } from '../store/lease-revoke.js';
import { stepLogsStartedKeep, stepLogSystem } from '../store/logs.js';
import type { PoolClient } from '../store/pool.js';
import {
  runCauseSet,
  runnerName,
  runOpenRecount,
  runsCloseSteps,
  runsFinish,
  stepFinish,
  stepGet,
  stepRequeue,
  stepsCloseWaiting,
  stepsReleaseAfter,
  stepsSkipDependents,
  stepsWithStatus,
  stepStart,
  stepsStart,
  stepsStartSql,
  stepsFinishClose,
  type RunRow,
} from '../store/runs.js';
import type { FreedOffer, OrchestratorHooks, StepOutcome, StepsEnded } from './contract.js';
import { enqueueFreedSteps } from './enqueue.js';

/**
 * A run-scoped run whose pinned runner is lost cannot go on (it is never re-pinned): every other
 * step still out is failed with the same cause, everything waiting is skipped, and the cause
 * names the runner.
 */
async function failPinnedRun(client: PoolClient, run: Pick<RunRow, 'id'>, runnerId: string): Promise<void> {
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
 * Records outcomes of any number of runs without taking their run rows for long: one statement
 * finishes the steps and counts them off their runs (rows locked in id order, held to the
 * commit), one frees the dependents of those that succeeded (only when some have dependents),
 * failures skip what is downstream of them, and the skipped steps are counted off in one more
 * statement (only when there are some). A run-scoped run whose pinned runner was
 * lost is failed under its run lock; then one statement ends every run whose count reached zero.
 * That statement comes after the count, not within it: a statement sees the steps as they were
 * when it began, and a count that waited for another transaction's lock on the run would judge
 * the run by steps that transaction has since finished.
 */
async function finishOutcomes(client: PoolClient, outcomes: StepOutcome[], offerFreed?: FreedOffer): Promise<StepsEnded> {
  const known: StepOutcome[] = [];
  for (const o of outcomes) {
    const runId = o.runId ?? (await stepGet(client, o.stepId))?.runId;
    if (runId !== undefined) known.push({ ...o, runId });
  }
  if (known.length === 0) return NOTHING_ENDED;
  const { finished, runs: counted } = await stepsFinishClose(
    client,
    known.map((o) => ({ stepId: o.stepId, attempt: o.attempt, status: o.status, exitCode: o.exitCode, cause: o.cause, runnerId: o.runnerId, seal: o.status === 'system_error' })),
  );
  // A stale attempt, a duplicate completion, or a step already cancelled is not among `finished`.
  if (finished.length === 0) return NOTHING_ENDED;
  const outcomeOf = new Map(known.map((o) => [o.stepId, o]));

  const freed = await stepsReleaseAfter(client, finished.filter((s) => s.status === 'succeeded' && s.dependents > 0).map((s) => ({ runId: s.runId, name: s.name })));
  await enqueueFreedSteps(client, freed.steps, freed.runs, offerFreed);
  const pinLost: Array<{ runId: number; runnerId: string }> = [];
  // Steps skipped below a failure close too: counted off their runs after the finished ones.
  const skippedOf = new Map<number, number>();
  for (const step of finished.filter((s) => s.status !== 'succeeded')) {
    const o = outcomeOf.get(step.id)!;
    if (step.status === 'system_error') await stepLogSystem(client, { stepId: step.id, attempt: step.attempt, text: `attempt ${step.attempt} ended in system_error: ${o.cause ?? 'unknown cause'}; log sealed` });
    if (step.dependents > 0) {
      const skipped = await stepsSkipDependents(client, { runId: step.runId, stepName: step.name, cause: `skipped: step ${step.name} ${step.status === 'failed' ? 'failed' : 'ended in system_error'}` });
      if (skipped.length > 0) skippedOf.set(step.runId, (skippedOf.get(step.runId) ?? 0) + skipped.length);
    }
    if (o.event === 'pinned_runner_lost' && o.runnerId) pinLost.push({ runId: step.runId, runnerId: o.runnerId });
  }
  const latest = new Map(counted.map((r) => [r.id, r]));
  for (const r of await runsCloseSteps(client, skippedOf)) latest.set(r.id, r);
  const runs = [...latest.values()].sort((a, b) => a.id - b.id);
  const ending: number[] = [];
  for (const run of runs.filter((r) => r.status === 'running')) {
    const lost = pinLost.find((p) => p.runId === run.id);
    let open = run.openSteps;
    if (lost) {
      await failPinnedRun(client, run, lost.runnerId);
      open = await runOpenRecount(client, run.id);
    }
    if (open <= 0) ending.push(run.id);
  }
  const ended = await runsFinish(client, { runIds: ending });
  return { attempts: finished.map((s) => ({ stepId: s.id, runId: s.runId, attempt: s.attempt, status: s.status })), runs: ended.map((r) => r.id) };
}

const NOTHING_ENDED: StepsEnded = { attempts: [], runs: [] };

export const orchestratorHooks: OrchestratorHooks = {
  // The attempt's started line is not written here: starting the step reserves its id, and the
  // line is derived from the step when logs are read (stepLogRead).
  async stepStarted(client, p) {
    await stepStart(client, p);
  },

  async stepFinished(client, o: StepOutcome) {
    return finishOutcomes(client, [o]);
  },

  async stepsStarted(client, items) {
    await stepsStart(client, items);
  },

  stepsStartedWithDelivery: stepsStartSql,

  async stepsFinished(client, outcomes, opts) {
    return finishOutcomes(client, outcomes, opts?.offerFreed);
  },

  async stepRequeued(client, p) {
    const requeued = await stepRequeue(client, p);
    if (!requeued) return;
    // The step forgets the attempt's start here, so its started line is written now, with this one.
    await stepLogsStartedKeep(client, requeued.ended ? [requeued.ended] : [], {
      stepId: requeued.step.id,
      attempt: p.fromAttempt,
      text: `attempt ${p.fromAttempt} back to the queue as attempt ${p.toAttempt}: ${p.reason}`,
    });
  },
};
