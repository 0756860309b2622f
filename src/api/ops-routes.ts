import type { FastifyReply, FastifyRequest } from 'fastify';
import { parseTraceParent } from '../core/trace-ids.js';
import { Invalid } from '../errors.js';
import type { OpsContext } from '../ops/domain/context.js';
import { DOMAIN, pathParams, VERBS, type FieldSchema, type Verb, type VerbSpec } from '../ops/verbs.js';
import type { FastifyInstance } from 'fastify';
import type { ReplicaEnv } from '../context.js';
import { adminActor, scopeAuth } from './admin-auth.js';

/**
 * Long polls (`runs logs --follow`) one API token may have parked on this replica at once, as
 * PARKED_PER_RUNNER bounds a runner's acquires: each parked poll holds a socket and re-reads the
 * store every LOGS_POLL_MS, so one token's followers must not crowd out everyone's reads. Past
 * it the poll is answered 429 with `retry-after`; a poll that does not wait (`waitMs` 0) is not
 * counted.
 */
export const PARKED_LONG_POLLS_PER_TOKEN = 32;

const INTEGER = '^-?(0|[1-9][0-9]{0,15})$';
const NUMBER = '^-?(0|[1-9][0-9]{0,15})(\\.[0-9]{1,15})?$';

/** A field as it arrives in a path or a query string: text, of the shape its type needs. */
function textual(schema: FieldSchema): FieldSchema {
  switch (schema.type) {
    case 'integer':
      return { type: 'string', pattern: INTEGER };
    case 'number':
      return { type: 'string', pattern: NUMBER };
    case 'boolean':
      return { type: 'string', enum: ['true', 'false'] };
    default:
      return schema;
  }
}

/** Text from a path or query back to the field's type, with the bounds its schema sets. */
function decode(name: string, schema: FieldSchema, raw: string): unknown {
  if (schema.type === 'boolean') return raw === 'true';
  if (schema.type !== 'integer' && schema.type !== 'number') return raw;
  const n = Number(raw);
  const { minimum, maximum, exclusiveMinimum } = schema as { minimum?: number; maximum?: number; exclusiveMinimum?: number };
  if ((minimum !== undefined && n < minimum) || (maximum !== undefined && n > maximum) || (exclusiveMinimum !== undefined && n <= exclusiveMinimum)) {
    const bounds = [minimum !== undefined ? `>= ${minimum}` : exclusiveMinimum !== undefined ? `> ${exclusiveMinimum}` : '', maximum !== undefined ? `<= ${maximum}` : ''].filter(Boolean).join(' and ');
    throw new Invalid(`${name}: must be ${bounds}`);
  }
  return n;
}

function routeSchema(spec: VerbSpec): Record<string, unknown> {
  const params = pathParams(spec.path);
  const rest = Object.entries(spec.fields).filter(([k]) => !params.includes(k));
  const required = (spec.required ?? []).filter((k) => !params.includes(k));
  const schema: Record<string, unknown> = {};
  if (params.length) {
    schema.params = { type: 'object', required: params, properties: Object.fromEntries(params.map((p) => [p, textual(spec.fields[p])])) };
  }
  if (spec.method === 'POST') {
    schema.body = { type: 'object', additionalProperties: false, required, properties: Object.fromEntries(rest) };
  } else {
    schema.querystring = { type: 'object', additionalProperties: false, required, properties: Object.fromEntries(rest.map(([k, s]) => [k, textual(s)])) };
  }
  return schema;
}

/** The verb's input from a request: path and query decoded by the fields' types, or the JSON body. */
function verbInput(spec: VerbSpec, req: FastifyRequest): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  const params = (req.params ?? {}) as Record<string, string>;
  for (const p of pathParams(spec.path)) input[p] = decode(p, spec.fields[p], params[p]);
  if (spec.method === 'POST') Object.assign(input, req.body ?? {});
  else for (const [k, v] of Object.entries((req.query ?? {}) as Record<string, string>)) input[k] = decode(k, spec.fields[k], v);
  return input;
}

/**
 * A verb that takes a traceparent takes the W3C header when its input names none. A header that
 * does not parse is ignored, as the W3C recommendation has it (the run starts a trace of its
 * own); the same text given as the field is refused as bad input.
 */
function traceparentFromHeader(input: Record<string, unknown>, req: FastifyRequest): void {
  const header = req.headers.traceparent;
  if (input.traceparent !== undefined || typeof header !== 'string') return;
  try {
    parseTraceParent(header);
    input.traceparent = header;
  } catch {
    req.log.debug({ traceparent: header }, 'traceparent header ignored: not a W3C traceparent');
  }
}

/**
 * The HTTP API of every verb (VERBS of src/ops): one route per verb, closed without a token whose
 * scope covers the verb, answering what the verb's domain function returns. Errors are the error
 * handler's: `{"error": {"code", "message"}}` with the status of the domain error's kind.
 */
export function registerOpsRoutes(app: FastifyInstance, ctx: Pick<ReplicaEnv, 'pool' | 'config'>): void {
  const auth = { read: scopeAuth(ctx.pool, 'read'), runs: scopeAuth(ctx.pool, 'runs'), levers: scopeAuth(ctx.pool, 'levers'), admin: scopeAuth(ctx.pool, 'admin') };
  // Parked long polls by token id, on this replica.
  const parkedBy = new Map<string, number>();
  for (const verb of Object.keys(VERBS) as Verb[]) {
    const spec = VERBS[verb];
    const fn = DOMAIN[verb] as (ctx: OpsContext, input: unknown) => Promise<unknown>;
    // A former path (deprecated) is the same route under its old name.
    for (const url of spec.deprecatedPath ? [spec.path, spec.deprecatedPath] : [spec.path]) app.route({
      method: spec.method,
      url,
      schema: routeSchema(spec),
      ...(spec.bodyLimit ? { bodyLimit: spec.bodyLimit } : {}),
      onRequest: auth[spec.scope],
      // A POST with no body is an empty input: a lever with no reason needs none.
      preValidation: async (req: FastifyRequest) => {
        if (spec.method === 'POST' && req.body == null) req.body = {};
      },
      handler: async (req: FastifyRequest, reply: FastifyReply) => {
        const input = verbInput(spec, req);
        if ('traceparent' in spec.fields) traceparentFromHeader(input, req);
        const parks = spec.longPoll && typeof input.waitMs === 'number' && input.waitMs > 0 ? req.adminToken?.id : undefined;
        if (parks !== undefined) {
          const parked = parkedBy.get(parks) ?? 0;
          if (parked >= PARKED_LONG_POLLS_PER_TOKEN) {
            return reply
              .code(429)
              .header('retry-after', '1')
              .send({ error: { code: 'too_many_long_polls', message: `too many long polls parked for this token (at most ${PARKED_LONG_POLLS_PER_TOKEN}); retry when one ends` } });
          }
          parkedBy.set(parks, parked + 1);
        }
        const gone = new AbortController();
        const onClose = () => {
          if (!reply.raw.writableFinished) gone.abort();
        };
        reply.raw.once('close', onClose);
        try {
          const opsCtx: OpsContext = { pool: ctx.pool, actor: adminActor(req), source: req.ip, tokenId: req.adminToken?.id, acceptExceeding: ctx.config.acceptExceeding, signal: gone.signal };
          return await fn(opsCtx, input);
        } finally {
          reply.raw.off('close', onClose);
          if (parks !== undefined) {
            const left = (parkedBy.get(parks) ?? 1) - 1;
            if (left > 0) parkedBy.set(parks, left);
            else parkedBy.delete(parks);
          }
        }
      },
    });
  }
}
