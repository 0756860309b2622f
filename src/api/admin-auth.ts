import type { FastifyReply, FastifyRequest } from 'fastify';
import { oneLine } from '../core/bounds.js';
import { scopeAllows, secretKind, type Scope } from '../core/tokens.js';
import { Forbidden, Unauthorized } from '../errors.js';
import type { Pool } from '../store/pool.js';
import { tokenCheck, type TokenRow } from '../store/tokens.js';
import { sendError } from './errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The API token that authorised this request (set by scopeAuth). */
    adminToken?: TokenRow;
  }
}

/** Who pulled a lever over HTTP, for the audit log. */
export function adminActor(req: FastifyRequest): string {
  return req.adminToken ? `token:${req.adminToken.name}(${req.adminToken.id})` : 'unknown';
}

const bearer = (req: FastifyRequest) => /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1];

/** The admin-scoped token a request presents, if it is live; never throws for a missing or malformed one. */
export async function adminTokenOf(pool: Pool, req: FastifyRequest): Promise<TokenRow | undefined> {
  const secret = bearer(req);
  if (!secret || secretKind(secret) !== 'admin') return undefined;
  const check = await tokenCheck(pool, 'admin', secret);
  return check.ok && scopeAllows(check.token.scope ?? 'admin', 'admin') ? check.token : undefined;
}

/**
 * A fastify `onRequest` hook closing a route to everyone without a live API token
 * (`Authorization: Bearer ocadm_…`, or the prefix of its scope: `ocread_`, `ocruns_`, `oclevers_`) whose scope covers `scope`. It runs before the body is read
 * or validated, so an anonymous caller gets 401 and nothing else. The secret is looked up by its
 * hash and compared in constant time; revocation and expiry are judged by the store's clock, so
 * every replica answers 401 from the same moment. A token outside its scope gets 403 naming the
 * scope it lacks. A store outage answers 503 through the error handler, so a client retries
 * instead of discarding its token. Register it as `{ onRequest: scopeAuth(pool, 'levers') }`.
 */
export function scopeAuth(pool: Pool, scope: Scope) {
  return async function scopeAuthOnRequest(req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const secret = bearer(req);
    if (!secret || secretKind(secret) !== 'admin') {
      sendError(reply, new Unauthorized('API token required (Authorization: Bearer <token from opschain tokens create>)'));
      return reply;
    }
    const check = await tokenCheck(pool, 'admin', secret);
    if (!check.ok) {
      const why = check.reason === 'unknown' ? 'token invalid' : `token ${oneLine(check.token!.name)} (${check.token!.id}) ${check.reason}`;
      sendError(reply, new Unauthorized(why, check.reason === 'unknown' ? 'unauthorized' : `token_${check.reason}`));
      return reply;
    }
    const held = check.token.scope ?? 'admin';
    if (!scopeAllows(held, scope)) {
      // The name is the token creator's text and goes back to the caller's terminal: controls escaped.
      sendError(reply, new Forbidden(`token ${oneLine(check.token.name)} has scope ${held}; ${req.method} ${req.routeOptions.url ?? req.url} needs scope ${scope}`, 'scope_lacking'));
      return reply;
    }
    req.adminToken = check.token;
  };
}

/** Closed to all but admin-scoped tokens. */
export function adminAuth(pool: Pool) {
  return scopeAuth(pool, 'admin');
}
