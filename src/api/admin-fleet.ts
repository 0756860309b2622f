import type { Feature } from '../server.js';
import { DrainTargetError, fleetDrainSet, fleetQueueRead } from '../store/fleet.js';
import { buildFleetQueue } from '../views/fleet-queue.js';
import { adminActor, adminAuth } from './admin-auth.js';
import { digits, object, text } from './schema.js';

const drainBody = object({
  runner: text({ minLength: 1, maxLength: 128 }),
  group: text({ minLength: 1, maxLength: 128 }),
  reason: text({ maxLength: 1000 }),
});

/**
 * The fleet's admin API: `GET /api/fleet/queue` (every entry with its verdict, the same shape as
 * `opschain fleet queue --json`) and `POST /api/fleet/drain|undrain` with `{runner}` or `{group}`
 * (idempotent, audited). All closed without an admin token.
 */
export function adminFleetApi(): Feature {
  return (ctx) => {
    const auth = adminAuth(ctx.pool);
    // Query values arrive as strings and the server never coerces types: the limit is a digit string.
    ctx.app.get<{ Querystring: { limit?: string } }>(
      '/api/fleet/queue',
      { onRequest: auth, schema: { querystring: object({ limit: digits({ maxDigits: 5 }) }) } },
      async (req) => buildFleetQueue(await fleetQueueRead(ctx.pool, { limit: req.query.limit ? Number(req.query.limit) : undefined }), { acceptExceeding: ctx.config.acceptExceeding }),
    );
    for (const verb of ['drain', 'undrain'] as const) {
      ctx.app.post<{ Body: { runner?: string; group?: string; reason?: string } }>(`/api/fleet/${verb}`, { onRequest: auth, schema: { body: drainBody } }, async (req, reply) => {
        const { runner, group, reason } = req.body ?? {};
        if ((runner === undefined) === (group === undefined)) {
          reply.code(400);
          return { error: { code: 'invalid_input', message: 'name one target: runner or group' } };
        }
        try {
          return await fleetDrainSet(ctx.pool, { runner, group, drained: verb === 'drain', reason: reason ?? null, actor: adminActor(req), source: req.ip });
        } catch (err) {
          if (!(err instanceof DrainTargetError)) throw err;
          reply.code(err.code === 'not_found' ? 404 : 409);
          return { error: { code: err.code, message: err.message } };
        }
      });
    }
  };
}
