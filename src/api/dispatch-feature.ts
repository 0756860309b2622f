import type { Feature } from '../context.js';
import { startDispatchPlane, type DispatchFeatureOptions } from '../dispatch/feature.js';
import { revocationFeed } from '../dispatch/revocations.js';
import { runnerCredentialsFeed } from './runner-credentials.js';
import { registerRunnerRoutes } from './runner-routes.js';

/** The dispatch plane of one replica with the runner protocol routes that serve it. */
export function dispatchFeature(opts: DispatchFeatureOptions): Feature {
  return (ctx) => {
    const plane = startDispatchPlane(ctx, ctx.ownership, opts);
    ctx.dispatch = plane.dispatcher;
    // Parked long polls would hold the HTTP close for a whole poll window: answer them first.
    ctx.app.addHook('preClose', async () => plane.answerParked());
    ctx.onStop.push(plane.stop);
    registerRunnerRoutes(ctx.app, plane.dispatcher, { clock: ctx.clock, pollWindowMs: ctx.config.pollWindowMs, holdPolls: opts.holdPolls ?? (() => !ctx.ownership.inMembership()), maxStepLogBytes: ctx.config.maxStepLogBytes, revocations: revocationFeed(ctx), credentials: runnerCredentialsFeed(ctx) });
  };
}
