import type { Feature } from '../context.js';
import { dispatchPlane, type DispatchFeatureOptions } from '../dispatch/feature.js';
import { revocationFeed } from '../dispatch/revocations.js';
import { registerRunnerRoutes } from './runner-routes.js';

/** The dispatch plane of one replica with the runner protocol routes that serve it. */
export function dispatchFeature(opts: DispatchFeatureOptions): Feature {
  return (ctx) => {
    const deps = dispatchPlane(ctx, opts);
    registerRunnerRoutes(ctx.app, deps, { pollWindowMs: ctx.config.pollWindowMs, holdPolls: opts.holdPolls ?? (() => !ctx.ownership.inMembership()), maxStepLogBytes: ctx.config.maxStepLogBytes, revocations: revocationFeed(ctx) });
  };
}
