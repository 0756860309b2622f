import { DEFAULT_TIMING } from '../../coordination/coordinator.js';
import { Invalid } from '../../errors.js';
import { adminQueueRead } from '../../store/admin-queue.js';
import { storeNow } from '../../store/pool.js';
import { fleetRead } from '../../store/fleet.js';
import { buildAdminQueue, type AdminQueueView } from '../../views/admin-queue.js';
import { buildRunners, type RunnersView } from '../../views/runners.js';
import type { OpsContext } from './context.js';
import { ADMIN_QUEUE_MAX_LIMIT } from '../verb-specs.js';

export { ADMIN_QUEUE_MAX_LIMIT };

/**
 * `admin queue`: the aggregate view from one REPEATABLE READ snapshot, a fixed handful of
 * statements whatever the depth (docs/console.md). Every tick of `admin queue --watch` is one call.
 */
export async function adminQueue(ctx: OpsContext, p: { limit?: number; acceptExceeding?: boolean }): Promise<AdminQueueView> {
  const limit = p.limit ?? 100;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > ADMIN_QUEUE_MAX_LIMIT) throw new Invalid(`limit ${limit}: expected 1 to ${ADMIN_QUEUE_MAX_LIMIT}`);
  const snapshot = await adminQueueRead(ctx.pool, { limit });
  return buildAdminQueue(snapshot, { acceptExceeding: p.acceptExceeding ?? ctx.acceptExceeding ?? true, stalenessMs: DEFAULT_TIMING.stalenessMs });
}

/** `fleet runners`: the registry with group, load, state, drain and last contact. */
export async function fleetRunners(ctx: OpsContext): Promise<RunnersView> {
  const [runners, now] = await Promise.all([fleetRead(ctx.pool), storeNow(ctx.pool)]);
  return buildRunners(runners, now);
}
