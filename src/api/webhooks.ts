import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { formatTraceParent, parseTraceParent, TraceParentError } from '../core/trace-ids.js';
import { payloadRefusal, WEBHOOK_HEADERS, WEBHOOK_MAX_BYTES, webhookVerify } from '../core/triggers.js';
import type { ReplicaEnv } from '../context.js';
import { isStatementTimeout, isStoreUnavailable, STATEMENT_TIMEOUT_MESSAGE, storeCause } from '../store/pool.js';
import { deliveryInsert, webhookForVerify } from '../store/triggers.js';

const DELIVERY_ID = /^[A-Za-z0-9._:-]{1,200}$/;

/**
 * The caller's W3C traceparent, normalised, for the run the delivery starts to join; a malformed
 * one is ignored (the run starts a trace of its own), as the recommendation has it and as
 * `POST /api/runs` does.
 */
function callerTraceparent(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  try {
    return formatTraceParent(parseTraceParent(value));
  } catch (err) {
    if (err instanceof TraceParentError) return undefined;
    throw err;
  }
}

function refuse(reply: FastifyReply, status: number, code: string, message: string) {
  reply.code(status).send({ error: { code, message } });
  return reply;
}

/**
 * `POST /api/hooks/:id`: a signed webhook call (docs/triggers.md). The raw body is read as bytes
 * (any content type, at most 1 MiB: 413 beyond), the signature `X-Opschain-Signature: sha256=<hex>`
 * over `<X-Opschain-Timestamp>.<body>` is checked in constant time, the timestamp must be within
 * 5 minutes, and a delivery id (`X-Opschain-Delivery`, or the signature itself when none is sent)
 * seen before is refused. A webhook created with an API token answers only while that token is
 * live (401 once it is revoked or expired). A valid call records the delivery and answers 202
 * with its id at once; the leader's launch loop fires it. A refused call records nothing.
 */
export function registerWebhookRoutes(app: FastifyInstance, ctx: Pick<ReplicaEnv, 'pool' | 'log'>): void {
  void app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: WEBHOOK_MAX_BYTES }, (_req, body, done) => done(null, body));
    scope.setErrorHandler((err: { statusCode?: number; code?: string; message: string }, _req, reply) => {
      if (err.statusCode === 413) return refuse(reply, 413, 'payload_too_large', `payload larger than ${WEBHOOK_MAX_BYTES} bytes (1 MiB)`);
      if (isStatementTimeout(err)) return refuse(reply, 422, 'statement_timeout', STATEMENT_TIMEOUT_MESSAGE);
      if (isStoreUnavailable(err)) return refuse(reply, 503, 'store_unavailable', `store unavailable: ${storeCause(err)} (retry)`);
      if (err.statusCode && err.statusCode < 500) return refuse(reply, err.statusCode, err.code ?? 'invalid_input', err.message);
      ctx.log.error({ err: err.message }, 'webhook call failed');
      return refuse(reply, 500, 'error', 'internal error');
    });
    scope.post<{ Params: { id: string } }>('/api/hooks/:id', { bodyLimit: WEBHOOK_MAX_BYTES }, async (req, reply) => {
      const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      if (!/^[1-9]\d{0,17}$/.test(req.params.id)) return refuse(reply, 404, 'not_found', `no webhook ${req.params.id}`);
      const hook = await webhookForVerify(ctx.pool, Number(req.params.id));
      if (!hook || !hook.enabled) return refuse(reply, 404, 'not_found', `no enabled webhook ${req.params.id}`);
      const header = (name: string) => {
        const v = req.headers[name];
        return Array.isArray(v) ? v[0] : v;
      };
      const signature = header(WEBHOOK_HEADERS.signature);
      const verdict = webhookVerify({ secret: hook.secret, timestamp: header(WEBHOOK_HEADERS.timestamp), signature, body, nowMs: hook.at.getTime() });
      if (!verdict.ok) return refuse(reply, 401, 'unauthorized', verdict.reason);
      // The secret was minted by a token: it is worth no more than that token is now.
      if (hook.owner && hook.owner.state !== 'live') {
        const what = hook.owner.state === 'unknown' ? 'no longer exists' : `was ${hook.owner.state === 'revoked' ? 'revoked' : 'expired'}`;
        const message = `webhook ${hook.id}: the token that created it (${hook.owner.tokenId}) ${what}; an admin can issue a new secret with 'opschain triggers webhook rotate ${hook.id}'`;
        return refuse(reply, 401, `owner_token_${hook.owner.state}`, message);
      }
      const given = header(WEBHOOK_HEADERS.delivery);
      if (given !== undefined && !DELIVERY_ID.test(given)) return refuse(reply, 400, 'invalid_input', `${WEBHOOK_HEADERS.delivery}: 1–200 of A-Z a-z 0-9 . _ : -`);
      const payload = body.toString('utf8');
      if (payload.includes('\u0000') || !Buffer.from(payload, 'utf8').equals(body)) return refuse(reply, 400, 'invalid_input', 'payload: expected UTF-8 text without NUL bytes');
      const refused = payloadRefusal(payload, hook.maps);
      if (refused) return refuse(reply, 400, 'invalid_input', refused);
      const deliveryKey = given ?? `sig-${createHash('sha256').update(signature!).digest('hex').slice(0, 32)}`;
      const traceparent = callerTraceparent(header('traceparent'));
      const recorded = await deliveryInsert(ctx.pool, { webhookId: hook.id, deliveryKey, signature: signature!.trim(), payload, ...(traceparent ? { traceparent } : {}) });
      if (!recorded) return refuse(reply, 409, 'replayed', `delivery ${deliveryKey} was already received`);
      reply.code(202);
      return { delivery_id: recorded.deliveryKey, webhook: hook.id };
    });
  });
}
