import { metricsApi } from './api/metrics.js';
import { opsApi } from './api/ops-routes.js';
import { webhookApi } from './api/webhooks.js';
import { coordinationFeature } from './coordination/coordinator.js';
import { expireOnce } from './dispatch/lifecycle.js';
import { dispatchFeature } from './api/dispatch-feature.js';
import { postureExpiryPass } from './dispatch/postures.js';
import { orchestratorHooks } from './orchestrator/progress.js';
import { historyRetentionPass } from './orchestrator/retention.js';
import type { Feature, ServerContext } from './server.js';
import { launchFeature, TRIGGER_RETENTION_MS, triggerHousekeepingDuty } from './triggers/feature.js';
import type { LeaderDuty } from './coordination/duties.js';

/** The leader's duties of a production replica beyond coordination's own, each once across the replicas. */
const leaderDuties: Array<(ctx: ServerContext) => LeaderDuty | undefined> = [
  // The lost-runner expiry sweep runs on the leader's coordination tick.
  (ctx) => ctx.dispatch && { name: 'lost-runner expiry', fallback: undefined, run: () => expireOnce(ctx.dispatch!) },
  (ctx) => ({ name: 'posture expiry', fallback: undefined, run: () => postureExpiryPass(ctx) }),
  (ctx) => ({ name: 'history retention', fallback: undefined, run: () => historyRetentionPass(ctx) }),
  (ctx) => triggerHousekeepingDuty({ pool: ctx.pool, log: ctx.log.child({ component: 'launch' }), retentionMs: TRIGGER_RETENTION_MS }),
];

/** The features every production replica runs, in start order. */
export function serverFeatures(): Feature[] {
  // Metrics first: its response hook then sees every route the others register. Coordination
  // before the loops that read the ownership it installs on the context.
  return [
    metricsApi(),
    coordinationFeature({ hooks: orchestratorHooks, leaderDuties }),
    opsApi(),
    dispatchFeature({ hooks: orchestratorHooks, ownExpiryLoop: false }),
    webhookApi(),
    launchFeature(),
  ];
}
