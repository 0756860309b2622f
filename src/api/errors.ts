import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import { DomainError, errorBody, Failed, type ErrorKind } from '../errors.js';
import { isStatementTimeout, isStoreUnavailable, STATEMENT_TIMEOUT_MESSAGE, storeCause } from '../store/pool.js';
import { SAFE_TEXT_MESSAGE, SAFE_TEXT_PATTERN } from './schema.js';

/** Domain error kind → HTTP status: the one place the API decides it. */
export const HTTP_STATUS: Record<ErrorKind, number> = {
  invalid: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  failed: 422,
  unavailable: 503,
  timed_out: 504,
};

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

/** Sends a domain error as its status and the one error body `{"error": {"code", "message"}}`. */
export function sendError(reply: FastifyReply, err: DomainError): FastifyReply {
  if (err.kind === 'unauthorized') reply.header('www-authenticate', 'Bearer');
  return reply.code(HTTP_STATUS[err.kind]).send(errorBody(err));
}

/**
 * Every error as the one body `{"error": {"code", "message"}}`: domain errors by their kind, 400
 * naming the field for bad input, 503 with the store verdict for outages, 422 for a statement the
 * store cancelled after its statement timeout (not retryable as sent), the framework's own 4xx
 * (413 too large, 415 content type, 400 bad JSON) as they are, 500 otherwise: a 500 is a bug (the
 * fuzz tier fails on one), and its detail goes to the log, never to the caller. The runner
 * protocol's verdict strings (`lease expired or revoked`, `credential invalid`, `store
 * unavailable: …`) are the messages, so a runner reads them where it always did, under `error`.
 */
export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err instanceof DomainError) return sendError(reply, err);
    if (err.validation) return reply.code(400).send({ error: { code: 'invalid_input', message: validationMessage(err) } });
    if (isStatementTimeout(err)) return sendError(reply, new Failed(STATEMENT_TIMEOUT_MESSAGE, 'statement_timeout'));
    if (isStoreUnavailable(err)) return reply.code(503).send({ error: { code: 'store_unavailable', message: storeUnavailableMessage(err) } });
    if (err.statusCode && err.statusCode < 500) return reply.code(err.statusCode).send({ error: { code: String(err.code ?? 'bad_request').toLowerCase(), message: err.message } });
    req.log.error({ err: err.message, code: (err as { code?: string }).code, url: req.url }, 'request failed');
    return reply.code(500).send({ error: { code: 'internal', message: 'internal error' } });
  });
  app.setNotFoundHandler((req, reply) => reply.code(404).send({ error: { code: 'no_route', message: `no route ${req.method} ${req.url.split('?')[0]}` } }));
}
