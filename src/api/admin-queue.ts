import { DEFAULT_TIMING } from '../coordination/coordinator.js';
import type { Feature } from '../server.js';
import { adminQueueRead } from '../store/admin-queue.js';
import { fleetRead } from '../store/fleet.js';
import { storeNow } from '../store/coordination.js';
import { buildAdminQueue } from '../views/admin-queue.js';
import { buildRunners } from '../views/runners.js';
import { adminAuth } from './admin-auth.js';
import { digits, object } from './schema.js';

/**
 * `GET /api/admin/queue` (the aggregate view, the shape of `opschain admin queue --json`) and
 * `GET /api/fleet/runners` (the registry, as `opschain fleet runners --json`); admin token only.
 */
export function adminQueueApi(): Feature {
  return (ctx) => {
    const auth = adminAuth(ctx.pool);
    ctx.app.get<{ Querystring: { limit?: string } }>(
      '/api/admin/queue',
      { onRequest: auth, schema: { querystring: object({ limit: digits({ maxDigits: 5 }) }) } },
      async (req) =>
        buildAdminQueue(await adminQueueRead(ctx.pool, { limit: req.query.limit ? Number(req.query.limit) : undefined }), {
          acceptExceeding: ctx.config.acceptExceeding,
          stalenessMs: DEFAULT_TIMING.stalenessMs,
        }),
    );
    ctx.app.get('/api/fleet/runners', { onRequest: auth }, async () => {
      const [runners, now] = await Promise.all([fleetRead(ctx.pool), storeNow(ctx.pool)]);
      return buildRunners(runners, now);
    });
  };
}
