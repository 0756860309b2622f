import type { FastifyInstance } from 'fastify';
import type { ReplicaEnv, ReplicaPart, ShardOwnership } from '../context.js';
import type { DispatchFeatureOptions } from '../dispatch/feature.js';
import type { Dispatcher } from '../dispatch/dispatcher.js';
import { revocationFeed } from '../dispatch/revocations.js';
import { runnerCredentialsFeed } from './runner-credentials.js';
import { registerRunnerRoutes } from './runner-routes.js';

/**
 * The runner protocol routes serving a replica's dispatcher; returns their part: the revocation
 * feed, the credential cache's listener, and the batched liveness writes.
 */
export function registerRunnerApi(app: FastifyInstance, env: ReplicaEnv, p: { dispatcher: Dispatcher; ownership: ShardOwnership; opts: DispatchFeatureOptions }): ReplicaPart {
  const { revocations, part: revocationPart } = revocationFeed(env);
  const { credentials, part: credentialPart } = runnerCredentialsFeed(env);
  const routes = registerRunnerRoutes(app, p.dispatcher, {
    clock: env.clock,
    pollWindowMs: env.config.pollWindowMs,
    idlePolls: p.opts.idlePolls ?? (() => !p.ownership.inMembership()),
    maxStepLogBytes: env.config.maxStepLogBytes,
    revocations,
    credentials,
  });
  const parts = [revocationPart, credentialPart, routes];
  return {
    halt: async () => {
      await Promise.all(parts.map((part) => part.halt()));
    },
    beforeClose: async () => {
      for (const part of parts) await part.beforeClose?.();
    },
    // The routes' liveness writes first (they need the pool, not the listeners), then the feeds.
    stop: async () => {
      for (const part of [...parts].reverse()) await part.stop();
    },
  };
}
