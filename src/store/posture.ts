import type { Pool, PoolClient } from './pool.js';

export interface FleetPosture { quiesced: boolean; halted: boolean; reason: string | null; actor: string | null; since: Date }

export async function postureRead(db: Pool | PoolClient): Promise<FleetPosture> {
  const { rows } = await db.query(`SELECT quiesced, halted, reason, actor, since FROM fleet_posture WHERE id`);
  const r = rows[0] ?? { quiesced: false, halted: false, reason: null, actor: null, since: new Date(0) };
  return { quiesced: r.quiesced, halted: r.halted, reason: r.reason, actor: r.actor, since: r.since };
}
