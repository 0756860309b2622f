import { expireOnce } from './dispatch/lifecycle.js';
import { postureExpiryPass } from './dispatch/postures.js';
import { orchestratorHooks } from './orchestrator/progress.js';
import { historyRetentionPass } from './orchestrator/retention.js';
import type { LeaderDutyOf, ReplicaPlan } from './server.js';
import { RunTracing, tracedHooks } from './telemetry/run-tracing.js';
import { TRIGGER_RETENTION_MS, triggerHousekeepingDuty } from './triggers/feature.js';

/** The leader's duties a replica may run beyond coordination's own, each once across the replicas. */
export const leaderDuties = {
  /** The lost-runner expiry sweep, on the leader's coordination tick rather than every replica's own loop. */
  expirySweep: ({ dispatcher }) => dispatcher && { name: 'lost-runner expiry', fallback: undefined, run: () => expireOnce(dispatcher) },
  postureExpiry: ({ env }) => ({ name: 'posture expiry', fallback: undefined, run: () => postureExpiryPass(env) }),
  historyRetention: ({ env }) => ({ name: 'history retention', fallback: undefined, run: () => historyRetentionPass(env) }),
  triggerHousekeeping: ({ env }) => triggerHousekeepingDuty({ pool: env.pool, log: env.log.child({ component: 'launch' }), retentionMs: TRIGGER_RETENTION_MS }),
} satisfies Record<string, LeaderDutyOf>;

/** What every production replica runs. */
export function serverPlan(): ReplicaPlan {
  // The hooks coordination and dispatch share emit the runs' spans through it (when it exports).
  const tracing = new RunTracing();
  const hooks = tracedHooks(orchestratorHooks, tracing);
  return {
    tracing,
    metrics: {},
    coordination: { hooks, leaderDuties: [leaderDuties.expirySweep, leaderDuties.postureExpiry, leaderDuties.historyRetention, leaderDuties.triggerHousekeeping] },
    ops: true,
    dispatch: { hooks, ownExpiryLoop: false },
    webhooks: true,
    launch: {},
  };
}
