import type { Pool, PoolClient } from './pool.js';

type Db = Pool | PoolClient;

/**
 * The durable posture flags every dispatch tick reads (one row): fleet quiesce, platform halt and
 * system quiesce. reason/actor/since describe the most recent change of any of them.
 */
export interface FleetPosture { quiesced: boolean; halted: boolean; systemQuiesced: boolean; reason: string | null; actor: string | null; since: Date }

/** The fleet_posture flag behind each posture. */
export type PostureField = 'quiesced' | 'halted' | 'system_quiesced';
export const POSTURE_FIELDS: readonly PostureField[] = ['quiesced', 'halted', 'system_quiesced'];

/** One posture in force: who pulled it, why, since when, and until when (null: until resumed). */
export interface PostureHold { posture: PostureField; reason: string | null; actor: string; source: string | null; since: Date; until: Date | null }

export async function postureRead(db: Db): Promise<FleetPosture> {
  const { rows } = await db.query(`SELECT quiesced, halted, system_quiesced, reason, actor, since FROM fleet_posture WHERE id`);
  const r = rows[0] ?? { quiesced: false, halted: false, system_quiesced: false, reason: null, actor: null, since: new Date(0) };
  return { quiesced: r.quiesced, halted: r.halted, systemQuiesced: r.system_quiesced, reason: r.reason, actor: r.actor, since: r.since };
}

const mapHold = (r: any): PostureHold => ({ posture: r.posture, reason: r.reason, actor: r.actor, source: r.source, since: r.since, until: r.until });

/** Every posture in force, with its story, in a fixed order. */
export async function postureHoldsRead(db: Db): Promise<PostureHold[]> {
  const { rows } = await db.query(`SELECT * FROM posture_holds ORDER BY array_position(ARRAY['halted','system_quiesced','quiesced'], posture)`);
  return rows.map(mapHold);
}

/**
 * Sets one posture flag on the durable row, locked so concurrent levers serialise, and keeps its
 * hold row (reason, actor, until) in step. A repeated lever changes nothing (idempotent) unless
 * it brings a new --until, which moves the expiry. Returns the hold before and after.
 */
export async function postureSet(
  client: PoolClient,
  p: { field: PostureField; value: boolean; reason: string | null; actor: string; source?: string | null; until?: Date | null },
): Promise<{ changed: boolean; untilChanged: boolean; before: PostureHold | undefined; posture: FleetPosture }> {
  const { rows } = await client.query(`SELECT quiesced, halted, system_quiesced FROM fleet_posture WHERE id FOR UPDATE`);
  const current: boolean = rows[0]?.[p.field] ?? false;
  const before = (await client.query(`SELECT * FROM posture_holds WHERE posture = $1`, [p.field])).rows.map(mapHold)[0];
  // The column name comes from the closed PostureField union, never from input.
  const column = POSTURE_FIELDS.find((f) => f === p.field)!;
  if (current === p.value) {
    const untilChanged = p.value && p.until !== undefined && (p.until?.getTime() ?? null) !== (before?.until?.getTime() ?? null);
    if (untilChanged) await client.query(`UPDATE posture_holds SET until = $2 WHERE posture = $1`, [p.field, p.until]);
    return { changed: false, untilChanged, before, posture: await postureRead(client) };
  }
  await client.query(
    `INSERT INTO fleet_posture (id, ${column}, reason, actor, since) VALUES (true, $1, $2, $3, now())
     ON CONFLICT (id) DO UPDATE SET ${column} = $1, reason = $2, actor = $3, since = now()`,
    [p.value, p.reason, p.actor],
  );
  if (p.value) {
    await client.query(
      `INSERT INTO posture_holds (posture, reason, actor, source, since, until) VALUES ($1, $2, $3, $4, now(), $5)
       ON CONFLICT (posture) DO UPDATE SET reason = $2, actor = $3, source = $4, since = now(), until = $5`,
      [p.field, p.reason, p.actor, p.source ?? null, p.until ?? null],
    );
  } else {
    await client.query(`DELETE FROM posture_holds WHERE posture = $1`, [p.field]);
  }
  return { changed: true, untilChanged: false, before, posture: await postureRead(client) };
}

/** The postures whose --until has passed by the database clock, locked for the leader to lift. */
export async function postureHoldsDue(client: PoolClient): Promise<PostureHold[]> {
  // The flags row first, as every lever does, so the leader and a lever never lock in opposite orders.
  await client.query(`SELECT 1 FROM fleet_posture WHERE id FOR UPDATE`);
  const { rows } = await client.query(`SELECT * FROM posture_holds WHERE until IS NOT NULL AND until <= now() ORDER BY until`);
  return rows.map(mapHold);
}
