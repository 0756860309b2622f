import { adminReplicaApi } from './api/admin-replicas.js';
import { coordinationFeature } from './coordination/coordinator.js';
import { dispatchFeature } from './dispatch/feature.js';
import { orchestratorHooks } from './orchestrator/progress.js';
import type { Feature } from './server.js';

/** The features every production replica runs, in start order. */
export function serverFeatures(): Feature[] {
  // Coordination first: the loops after it read the ownership it installs on the context.
  return [coordinationFeature({ hooks: orchestratorHooks }), adminReplicaApi(), dispatchFeature({ hooks: orchestratorHooks })];
}
