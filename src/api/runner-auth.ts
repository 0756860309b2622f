import type { FastifyReply, FastifyRequest } from 'fastify';
import { hashSecret, secretKind } from '../core/tokens.js';
import { runnerByCredential, type RunnerRow } from '../store/runners.js';
import type { Pool } from '../store/pool.js';
import { Unauthorized } from '../errors.js';
import { sendError } from './errors.js';

export const CREDENTIAL_INVALID = 'credential invalid';
const CACHE_MS = 5_000;

declare module 'fastify' {
  interface FastifyRequest {
    runner?: RunnerRow;
  }
}

/**
 * Runner credentials: looked up by hash (the secret is never stored), cached briefly so a
 * poll does not cost a read. `credential invalid` only when the store says there is no such
 * registration; a store outage surfaces as 503 through the error handler.
 */
export function runnerAuth(pool: Pool) {
  const cache = new Map<string, { runner: RunnerRow; at: number }>();
  return async (req: FastifyRequest, reply: FastifyReply) => {
    const header = req.headers.authorization ?? '';
    const secret = header.startsWith('Bearer ') ? header.slice(7).trim() : '';
    if (!secret || secretKind(secret) !== 'runner') return sendError(reply, new Unauthorized(CREDENTIAL_INVALID, 'credential_invalid'));
    const hash = hashSecret(secret);
    const hit = cache.get(hash);
    if (hit && Date.now() - hit.at < CACHE_MS) {
      req.runner = hit.runner;
      return;
    }
    const runner = await runnerByCredential(pool, hash);
    if (!runner) {
      cache.delete(hash);
      return sendError(reply, new Unauthorized(CREDENTIAL_INVALID, 'credential_invalid'));
    }
    if (cache.size > 10_000) cache.clear();
    cache.set(hash, { runner, at: Date.now() });
    req.runner = runner;
  };
}
