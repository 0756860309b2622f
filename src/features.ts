import { dispatchFeature } from './dispatch/feature.js';
import { orchestratorHooks } from './orchestrator/progress.js';
import type { Feature } from './server.js';

/** The features every production replica runs, in start order. */
export function serverFeatures(): Feature[] {
  return [dispatchFeature({ hooks: orchestratorHooks })];
}
