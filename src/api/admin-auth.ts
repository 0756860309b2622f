import type { FastifyReply, FastifyRequest } from 'fastify';
import { secretKind } from '../core/tokens.js';
import { isStoreUnavailable, storeCause, type Pool } from '../store/pool.js';
import { tokenVerify, type TokenRow } from '../store/tokens.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The admin token that authorised this request (set by adminAuth). */
    adminToken?: TokenRow;
  }
}

/** Who pulled a lever over HTTP, for the audit log. */
export function adminActor(req: FastifyRequest): string {
  return req.adminToken ? `token:${req.adminToken.name}(${req.adminToken.id})` : 'unknown';
}

/** The admin token a request presents, if it is live; never throws for a missing or malformed one. */
export async function adminTokenOf(pool: Pool, req: FastifyRequest): Promise<TokenRow | undefined> {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  if (!m || secretKind(m[1]) !== 'admin') return undefined;
  return tokenVerify(pool, 'admin', m[1]);
}

/**
 * A fastify `onRequest` hook closing a route to everyone without a live admin token
 * (`Authorization: Bearer ocadm_…`). It runs before the body is read or validated, so an
 * anonymous caller gets 401 and nothing else: no field-level 400, no buffered body. The secret is
 * compared as a hash, in constant time, by tokenVerify; a store outage answers 503 so a client
 * retries instead of discarding its token. Register it as `{ onRequest: adminAuth(pool) }`.
 */
export function adminAuth(pool: Pool) {
  return async function adminAuthOnRequest(req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    if (!m || secretKind(m[1]) !== 'admin') {
      reply.code(401).header('www-authenticate', 'Bearer').send({ error: { code: 'unauthorized', message: 'admin token required' } });
      return reply;
    }
    let token: TokenRow | undefined;
    try {
      token = await tokenVerify(pool, 'admin', m[1]);
    } catch (err) {
      if (!isStoreUnavailable(err)) throw err;
      reply.code(503).send({ error: { code: 'store_unavailable', message: `store unavailable: ${storeCause(err)} (retry)` } });
      return reply;
    }
    if (!token) {
      reply.code(401).header('www-authenticate', 'Bearer').send({ error: { code: 'unauthorized', message: 'admin token invalid or revoked' } });
      return reply;
    }
    req.adminToken = token;
  };
}
