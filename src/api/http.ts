import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from '../logger.js';
import type { Readiness } from './readiness.js';

export interface HttpDeps { log: Logger; readiness: Readiness; version: string; replicaId: string }

/** The fastify instance with the health endpoints; feature modules register their routes on it. */
export function createHttpServer(deps: HttpDeps): FastifyInstance {
  const app = Fastify({
    loggerInstance: deps.log.child({ component: 'http' }, { level: 'warn' }) as any,
    // Unknown fields are errors and types are never coerced: a typo must not be silently accepted.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false } },
    bodyLimit: 4 * 1024 * 1024,
  });
  app.get('/healthz', async () => ({ status: 'ok', replica: deps.replicaId, version: deps.version }));
  app.get('/readyz', async (_req, reply) => {
    const { ready, checks } = await deps.readiness.evaluate();
    const failing = checks.filter((c) => !c.ok).map((c) => c.name);
    reply.code(ready ? 200 : 503);
    return { status: ready ? 'ready' : 'not ready', failing, checks, replica: deps.replicaId };
  });
  return app;
}
