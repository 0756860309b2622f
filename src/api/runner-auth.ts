import type { FastifyReply, FastifyRequest } from 'fastify';
import { hashSecret, secretKind } from '../core/tokens.js';
import { turnBatcher } from '../core/turn-batch.js';
import { runnersByCredentials, type RunnerRow } from '../store/runners.js';
import type { Pool } from '../store/pool.js';
import { Unauthorized } from '../errors.js';
import { sendError } from './errors.js';

export const CREDENTIAL_INVALID = 'credential invalid';

declare module 'fastify' {
  interface FastifyRequest {
    runner?: RunnerRow;
  }
}

/**
 * Runner credentials: looked up by hash (the secret is never stored) on every call, read after
 * the call arrived, so a runner removed or revoked on any replica gets `credential invalid` on its
 * very next call everywhere (no replica holds a stale copy). The calls arriving in one turn of the
 * event loop share one indexed read. `credential invalid` only when the store says there is no
 * such live registration; a store outage surfaces as 503 through the error handler.
 */
export function runnerAuth(pool: Pool) {
  const runnerByCredential = turnBatcher((hashes: string[]) => runnersByCredentials(pool, hashes));
  return async (req: FastifyRequest, reply: FastifyReply) => {
    const header = req.headers.authorization ?? '';
    const secret = header.startsWith('Bearer ') ? header.slice(7).trim() : '';
    if (!secret || secretKind(secret) !== 'runner') return sendError(reply, new Unauthorized(CREDENTIAL_INVALID, 'credential_invalid'));
    const runner = await runnerByCredential(hashSecret(secret));
    if (!runner) return sendError(reply, new Unauthorized(CREDENTIAL_INVALID, 'credential_invalid'));
    req.runner = runner;
  };
}
