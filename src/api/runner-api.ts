import type { FastifyInstance } from 'fastify';
import type { ReplicaEnv, ReplicaPart, ShardOwnership } from '../context.js';
import type { DispatchFeatureOptions } from '../dispatch/feature.js';
import type { Dispatcher } from '../dispatch/dispatcher.js';
import { revocationFeed } from '../dispatch/revocations.js';
import { registerRunnerRoutes } from './runner-routes.js';

/** The runner protocol routes serving a replica's dispatcher; returns the part of its revocation feed. */
export function registerRunnerApi(app: FastifyInstance, env: ReplicaEnv, p: { dispatcher: Dispatcher; ownership: ShardOwnership; opts: DispatchFeatureOptions }): ReplicaPart {
  const { revocations, part } = revocationFeed(env);
  registerRunnerRoutes(app, p.dispatcher, {
    clock: env.clock,
    pollWindowMs: env.config.pollWindowMs,
    holdPolls: p.opts.holdPolls ?? (() => !p.ownership.inMembership()),
    maxStepLogBytes: env.config.maxStepLogBytes,
    revocations,
  });
  return part;
}
