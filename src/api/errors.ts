import type { FastifyError, FastifyInstance } from 'fastify';
import { isStoreUnavailable, storeCause } from '../store/pool.js';
import { SAFE_TEXT_MESSAGE, SAFE_TEXT_PATTERN } from './schema.js';

/** The exact 503 text runners switch on; nothing was recorded. */
export function storeUnavailableMessage(err: unknown): string {
  return `store unavailable: ${storeCause(err)} (this server's readiness check 'store' is failing; retry)`;
}

/** `body/max_offers must be <= 64` → `max_offers: must be <= 64`, naming the field. */
export function validationMessage(err: FastifyError): string {
  const v = err.validation?.[0];
  if (!v) return err.message;
  const path = v.instancePath.replace(/^\//, '').replace(/\//g, '.');
  const params = v.params as Record<string, string>;
  if (v.keyword === 'required') return `${path ? `${path}.` : ''}${params.missingProperty}: required`;
  if (v.keyword === 'additionalProperties') return `${path ? `${path}.` : ''}${params.additionalProperty}: unknown field`;
  if (v.keyword === 'pattern' && params.pattern === SAFE_TEXT_PATTERN) return `${path || err.validationContext || 'body'}: ${SAFE_TEXT_MESSAGE}`;
  return `${path || err.validationContext || 'body'}: ${v.message ?? 'invalid'}`;
}

/**
 * 400 naming the field for bad bodies, 503 with the store verdict for outages, the framework's
 * own 4xx (413 too large, 415 content type, 400 bad JSON) as they are, 500 otherwise: a 500 is a
 * bug (the fuzz tier fails on one), and its detail goes to the log, never to the caller.
 */
export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err.validation) return reply.code(400).send({ error: validationMessage(err) });
    if (isStoreUnavailable(err)) return reply.code(503).send({ error: storeUnavailableMessage(err) });
    if (err.statusCode && err.statusCode < 500) return reply.code(err.statusCode).send({ error: err.message });
    req.log.error({ err: err.message, code: (err as { code?: string }).code, url: req.url }, 'request failed');
    return reply.code(500).send({ error: 'internal error' });
  });
}
