import type { Pool } from '../store/pool.js';
import { replicaHeartbeat } from '../store/replicas.js';

export const HEARTBEAT_INTERVAL_MS = 5_000;

/** One heartbeat pass: keeps this replica's membership row fresh. */
export async function heartbeatOnce(deps: { pool: Pool; replicaId: string }): Promise<number> {
  await replicaHeartbeat(deps.pool, deps.replicaId);
  return HEARTBEAT_INTERVAL_MS;
}
