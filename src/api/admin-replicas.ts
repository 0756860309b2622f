import { adminStatusRead } from '../coordination/status.js';
import { replicaQuiesceSet } from '../coordination/levers.js';
import type { Feature } from '../server.js';
import { adminActor, adminAuth } from './admin-auth.js';
import { object, pathId } from './schema.js';

/**
 * The admin API of the coordination plane: `GET /api/admin/status` and the replica levers
 * `POST /api/admin/replicas/:id/quiesce|resume`. All closed without an admin token.
 */
export function adminReplicaApi(): Feature {
  return (ctx) => {
    const auth = adminAuth(ctx.pool);
    ctx.app.get('/api/admin/status', { onRequest: auth }, async () => adminStatusRead(ctx.pool));
    for (const verb of ['quiesce', 'resume'] as const) {
      ctx.app.post<{ Params: { id: string } }>(`/api/admin/replicas/:id/${verb}`, { onRequest: auth, schema: { params: object({ id: pathId() }, ['id']) } }, async (req, reply) => {
        const result = await replicaQuiesceSet(ctx.pool, { id: req.params.id, quiesced: verb === 'quiesce', actor: adminActor(req), source: req.ip });
        if (!result) {
          reply.code(404);
          return { error: { code: 'not_found', message: `no replica with id ${req.params.id}` } };
        }
        return result;
      });
    }
  };
}
