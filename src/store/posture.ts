import type { Pool, PoolClient } from './pool.js';

export interface FleetPosture { quiesced: boolean; halted: boolean; reason: string | null; actor: string | null; since: Date }

export async function postureRead(db: Pool | PoolClient): Promise<FleetPosture> {
  const { rows } = await db.query(`SELECT quiesced, halted, reason, actor, since FROM fleet_posture WHERE id`);
  const r = rows[0] ?? { quiesced: false, halted: false, reason: null, actor: null, since: new Date(0) };
  return { quiesced: r.quiesced, halted: r.halted, reason: r.reason, actor: r.actor, since: r.since };
}

export type PostureField = 'quiesced' | 'halted';

/**
 * Sets one posture flag on the durable row, locked so concurrent levers serialise. Returns the
 * posture after, and whether anything changed (a repeated lever is a no-op, not an error).
 */
export async function postureSet(client: PoolClient, p: { field: PostureField; value: boolean; reason: string | null; actor: string }): Promise<{ changed: boolean; posture: FleetPosture }> {
  const { rows } = await client.query(`SELECT quiesced, halted FROM fleet_posture WHERE id FOR UPDATE`);
  const current = rows[0]?.[p.field] ?? false;
  if (current === p.value) return { changed: false, posture: await postureRead(client) };
  // The column name comes from the closed PostureField union, never from input.
  const column = p.field === 'halted' ? 'halted' : 'quiesced';
  await client.query(
    `INSERT INTO fleet_posture (id, ${column}, reason, actor, since) VALUES (true, $1, $2, $3, now())
     ON CONFLICT (id) DO UPDATE SET ${column} = $1, reason = $2, actor = $3, since = now()`,
    [p.value, p.reason, p.actor],
  );
  return { changed: true, posture: await postureRead(client) };
}
