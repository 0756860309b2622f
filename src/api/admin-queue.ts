import { DEFAULT_TIMING } from '../coordination/coordinator.js';
import type { Feature } from '../server.js';
import { adminQueueRead } from '../store/admin-queue.js';
import { fleetRead } from '../store/fleet.js';
import { storeNow } from '../store/coordination.js';
import { buildAdminQueue } from '../views/admin-queue.js';
import { buildRunners } from '../views/runners.js';
import { adminAuth } from './admin-auth.js';

/**
 * `GET /api/admin/queue` (the aggregate view, the shape of `opschain admin queue --json`) and
 * `GET /api/fleet/runners` (the registry, as `opschain fleet runners --json`); admin token only.
 */
export function adminQueueApi(): Feature {
  return (ctx) => {
    const auth = adminAuth(ctx.pool);
    ctx.app.get<{ Querystring: { limit?: string } }>(
      '/api/admin/queue',
      { preHandler: auth, schema: { querystring: { type: 'object', additionalProperties: false, properties: { limit: { type: 'string', pattern: '^[1-9][0-9]{0,4}$' } } } } },
      async (req) =>
        buildAdminQueue(await adminQueueRead(ctx.pool, { limit: req.query.limit ? Number(req.query.limit) : undefined }), {
          acceptExceeding: ctx.config.acceptExceeding,
          stalenessMs: DEFAULT_TIMING.stalenessMs,
        }),
    );
    ctx.app.get('/api/fleet/runners', { preHandler: auth }, async () => {
      const [runners, now] = await Promise.all([fleetRead(ctx.pool), storeNow(ctx.pool)]);
      return buildRunners(runners, now);
    });
  };
}
