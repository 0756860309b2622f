import type { PostureField } from '../core/postures.js';
import type { PoolClient, Db } from './pool.js';

/** Who put one posture in force, why and since when. */
export interface PostureStory { posture: PostureField; reason: string | null; actor: string; since: Date }

/**
 * The durable posture flags every dispatch tick reads (one row): fleet quiesce, platform halt and
 * system quiesce. Each posture in force keeps its own story (`holds`, most severe first);
 * reason/actor are those of the posture that stops offers now (the most severe), null when none
 * is in force, and `since` is the time of the last change of any flag.
 */
export interface FleetPosture { fleetQuiesced: boolean; halted: boolean; systemQuiesced: boolean; reason: string | null; actor: string | null; since: Date; holds: PostureStory[] }

export type { PostureField };
export const POSTURE_FIELDS: readonly PostureField[] = ['quiesced', 'halted', 'system_quiesced'];

/** One posture in force: who pulled it, why, since when, and until when (null: until resumed). */
export interface PostureInForce { posture: PostureField; reason: string | null; actor: string; source: string | null; since: Date; until: Date | null }

/**
 * Severity order of the postures: the first in force is the one that stops offers. (A posture in
 * force is a row of posture_holds and an entry of `holds` on the wire: those names are stored.)
 */
const SEVERITY = `ARRAY['halted','system_quiesced','quiesced']`;

export async function postureRead(db: Db): Promise<FleetPosture> {
  // One statement: the flags and the story of each posture in force, read together.
  const { rows } = await db.query(
    `SELECT p.quiesced, p.halted, p.system_quiesced, p.reason, p.actor, p.since,
            (SELECT coalesce(json_agg(json_build_object('posture', h.posture, 'reason', h.reason, 'actor', h.actor, 'since', h.since)
                                      ORDER BY array_position(${SEVERITY}, h.posture)), '[]')
               FROM posture_holds h) AS holds
       FROM fleet_posture p WHERE p.id`,
  );
  const r = rows[0] ?? { quiesced: false, halted: false, system_quiesced: false, reason: null, actor: null, since: new Date(0), holds: [] };
  const flags: Record<PostureField, boolean> = { halted: r.halted, system_quiesced: r.system_quiesced, quiesced: r.quiesced };
  const holds: PostureStory[] = (r.holds as Array<{ posture: PostureField; reason: string | null; actor: string; since: string }>)
    .filter((h) => flags[h.posture])
    .map((h) => ({ posture: h.posture, reason: h.reason, actor: h.actor, since: new Date(h.since) }));
  const stopping = (['halted', 'system_quiesced', 'quiesced'] as const).find((f) => flags[f]);
  // A flag with no story (set before stories were kept) falls back to the row's last change.
  const story = stopping ? (holds.find((h) => h.posture === stopping) ?? { reason: r.reason, actor: r.actor }) : undefined;
  return { fleetQuiesced: r.quiesced, halted: r.halted, systemQuiesced: r.system_quiesced, reason: story?.reason ?? null, actor: story?.actor ?? null, since: r.since, holds };
}

const mapInForce = (r: any): PostureInForce => ({ posture: r.posture, reason: r.reason, actor: r.actor, source: r.source, since: r.since, until: r.until });

/** Every posture in force, with its story, in a fixed order. */
export async function posturesInForceRead(db: Db): Promise<PostureInForce[]> {
  const { rows } = await db.query(`SELECT * FROM posture_holds ORDER BY array_position(${SEVERITY}, posture)`);
  return rows.map(mapInForce);
}

/**
 * Sets one posture flag on the durable row, locked so concurrent levers serialise, and keeps its
 * posture_holds row (reason, actor, until) in step. A repeated lever changes nothing (idempotent) unless
 * it brings a new --until, which moves the expiry. Returns the posture in force before and after.
 */
export async function postureSet(
  client: PoolClient,
  p: { field: PostureField; value: boolean; reason: string | null; actor: string; source?: string | null; until?: Date | null },
): Promise<{ changed: boolean; untilChanged: boolean; before: PostureInForce | undefined; posture: FleetPosture }> {
  const { rows } = await client.query(`SELECT quiesced, halted, system_quiesced FROM fleet_posture WHERE id FOR UPDATE`);
  const current: boolean = rows[0]?.[p.field] ?? false;
  const before = (await client.query(`SELECT * FROM posture_holds WHERE posture = $1`, [p.field])).rows.map(mapInForce)[0];
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

/** The postures whose --until has passed by the database clock (or at `now` when given), locked for the leader to lift. */
export async function posturesDueToLift(client: PoolClient, p: { now?: Date } = {}): Promise<PostureInForce[]> {
  // The flags row first, as every lever does, so the leader and a lever never lock in opposite orders.
  await client.query(`SELECT 1 FROM fleet_posture WHERE id FOR UPDATE`);
  const { rows } = await client.query(`SELECT * FROM posture_holds WHERE until IS NOT NULL AND until <= coalesce($1::timestamptz, now()) ORDER BY until`, [p.now ?? null]);
  return rows.map(mapInForce);
}
