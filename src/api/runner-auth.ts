import type { FastifyReply, FastifyRequest } from 'fastify';
import { hashSecret, secretKind } from '../core/tokens.js';
import { turnBatcher } from '../core/turn-batch.js';
import { runnersByCredentials, type RunnerRow } from '../store/runners.js';
import type { Pool } from '../store/pool.js';
import { Unauthorized } from '../errors.js';
import { sendError } from './errors.js';
import type { RunnerCredentials } from './runner-credentials.js';

export const CREDENTIAL_INVALID = 'credential invalid';

declare module 'fastify' {
  interface FastifyRequest {
    runner?: RunnerRow;
  }
}

/**
 * Runner credentials, looked up by hash (the secret is never stored): from the replica's cache
 * (RunnerCredentials) when it holds the runner, else from the store, the calls arriving in one
 * turn of the event loop sharing one indexed read, whose answers fill the cache. A runner removed
 * or revoked on any replica gets `credential invalid` everywhere within the revocation notice's
 * delay (the cache forgets it at the notice, and is off while notices may be missed).
 * `credential invalid` only when the store says there is no such live registration; a store
 * outage surfaces as 503 through the error handler.
 */
export function runnerAuth(pool: Pool, credentials?: RunnerCredentials) {
  const runnerByCredential = turnBatcher(async (hashes: string[]) => {
    const mark = credentials?.mark() ?? 0;
    const found = await runnersByCredentials(pool, hashes);
    credentials?.put(mark, found.values());
    return found;
  });
  return async (req: FastifyRequest, reply: FastifyReply) => {
    const header = req.headers.authorization ?? '';
    const secret = header.startsWith('Bearer ') ? header.slice(7).trim() : '';
    if (!secret || secretKind(secret) !== 'runner') return sendError(reply, new Unauthorized(CREDENTIAL_INVALID, 'credential_invalid'));
    const hash = hashSecret(secret);
    const runner = credentials?.get(hash) ?? (await runnerByCredential(hash));
    if (!runner) return sendError(reply, new Unauthorized(CREDENTIAL_INVALID, 'credential_invalid'));
    req.runner = runner;
  };
}
