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
import { tracingFeature } from './telemetry/feature.js';
import { RunTracing, tracedHooks } from './telemetry/run-tracing.js';
import { launchFeature } from './triggers/feature.js';

/** The lost-runner expiry sweep runs on the leader's coordination tick: once across the replicas. */
const expirySweep = async (ctx: ServerContext) => (ctx.dispatch ? expireOnce(ctx.dispatch) : undefined);

/** The features every production replica runs, in start order. */
export function serverFeatures(): Feature[] {
  // Metrics first: its response hook then sees every route the others register. Coordination
  // before the loops that read the ownership it installs on the context. Tracing before both: the
  // hooks they share emit through it.
  const tracing = new RunTracing();
  const hooks = tracedHooks(orchestratorHooks, tracing);
  return [
    metricsApi(),
    tracingFeature(tracing),
    coordinationFeature({ hooks, leaderPasses: [expirySweep, postureExpiryPass, historyRetentionPass] }),
    opsApi(),
    dispatchFeature({ hooks, ownExpiryLoop: false }),
    webhookApi(),
    launchFeature(),
  ];
}
