import type { QueueEntry } from '../core/entry.js';
import type { DeliveryWrite, LeaseTimes } from '../store/leases.js';
import type { PoolClient } from '../store/pool.js';

/** How a leased attempt ended, as the lease lifecycle reports it to the orchestrator. */
export interface StepOutcome {
  stepId: number;
  /** The step's run when the caller knows it (saves a read). */
  runId?: number;
  attempt: number;
  status: 'succeeded' | 'failed' | 'system_error';
  exitCode: number | null;
  cause: string | null;
  runnerId: string | null;
  /** `runner_lost` or `pinned_runner_lost` for expiries; null otherwise. */
  event?: string | null;
  /** The ended lease's times, when the caller read them (traces on): the attempt's spans show them. */
  lease?: LeaseTimes;
}

/** What a finish recorded: the attempts that were current and ended, and the runs that ended with them. */
export interface StepsEnded {
  attempts: Array<{ stepId: number; runId: number; attempt: number; status: string }>;
  runs: number[];
}

/**
 * Takes entries a finish has just queued, in the finish's own transaction (the dispatch plane
 * handing them straight to parked calls): returns the step ids it leased. What it leaves is
 * announced to every dispatcher before the commit, as any enqueue is.
 */
export type FreedOffer = (client: PoolClient, queued: QueueEntry[]) => Promise<Set<number>>;

/**
 * The orchestrator's side of the seam with the dispatch plane. Each hook runs inside the
 * caller's transaction, so a lease transition and the run's progress commit together.
 */
export interface OrchestratorHooks {
  /** A step's attempt was delivered to a runner: the step is running there. */
  stepStarted(client: PoolClient, p: { stepId: number; attempt: number; runnerId: string }): Promise<void>;
  /** A step's attempt finished (complete, or expiry as runner_lost): record, roll up, enqueue what became ready. */
  stepFinished(client: PoolClient, outcome: StepOutcome): Promise<StepsEnded | void>;
  /** Batch form of stepStarted, one tick's deliveries at once. */
  stepsStarted(client: PoolClient, items: Array<{ stepId: number; attempt: number; runnerId: string }>): Promise<void>;
  /**
   * stepsStarted as a write the delivery carries in its own statement, a round trip fewer per
   * tick. When present, the dispatch tick delivers with it and does not call stepsStarted.
   */
  stepsStartedWithDelivery?: DeliveryWrite;
  /**
   * Batch form of stepFinished: each run is locked and rolled up once for all its outcomes. With
   * `offerFreed`, the steps the outcomes free are offered through it as soon as they are queued.
   */
  stepsFinished(client: PoolClient, outcomes: StepOutcome[], opts?: { offerFreed?: FreedOffer }): Promise<StepsEnded | void>;
  /** A step's attempt went back to the queue as a new attempt (release, un-acked offer, reclaimed exposed claim). */
  stepRequeued(client: PoolClient, p: { stepId: number; fromAttempt: number; toAttempt: number; reason: string; lease?: LeaseTimes }): Promise<void>;
}
