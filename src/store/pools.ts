import type { PoolState } from '../core/plan.js';
import type { PoolClient, Db } from './pool.js';
import { poolFreedNotify } from './queue.js';

/** A step occupying a slot of a pool (a row of pool_holds, a name the store keeps). */
export interface PoolOccupant { stepId: number; attempt: number; heldAt: Date }
export interface PoolRow {
  name: string;
  /** null: no limit row, the pool is unlimited (listed because a step occupies a slot of it). */
  limit: number | null;
  holders: PoolOccupant[];
}

/** Sets (or changes) a pool's limit. Idempotent. Announced as a release: a raised limit frees slots. */
export async function poolLimitSet(db: Db, p: { name: string; limit: number }): Promise<void> {
  await db.query(
    `WITH s AS (INSERT INTO pool_limits (name, max_holders) VALUES ($1, $2)
                ON CONFLICT (name) DO UPDATE SET max_holders = EXCLUDED.max_holders, updated_at = now() RETURNING name)
     SELECT ${poolFreedNotify('s.name')} FROM s`,
    [p.name, p.limit],
  );
}

/** Removes a pool's limit (the pool becomes unlimited); false when it had none. Announced as a release. */
export async function poolLimitUnset(db: Db, p: { name: string }): Promise<boolean> {
  const { rowCount } = await db.query(`WITH u AS (DELETE FROM pool_limits WHERE name = $1 RETURNING name) SELECT ${poolFreedNotify('u.name')} FROM u`, [p.name]);
  return (rowCount ?? 0) > 0;
}

/** Every limited pool and every pool currently held, with its holders, in name order. */
export async function poolLimitList(db: Db): Promise<PoolRow[]> {
  const { rows } = await db.query(
    `SELECT n.name, l.max_holders,
            coalesce((SELECT json_agg(json_build_object('stepId', h.step_id, 'attempt', h.attempt, 'heldAt', h.held_at) ORDER BY h.held_at, h.step_id)
                        FROM pool_holds h WHERE h.pool = n.name), '[]'::json) AS holders
       FROM (SELECT name FROM pool_limits UNION SELECT DISTINCT pool FROM pool_holds) n
       LEFT JOIN pool_limits l ON l.name = n.name
      ORDER BY n.name`,
  );
  return rows.map((r) => ({
    name: r.name,
    limit: r.max_holders ?? null,
    holders: (r.holders as Array<{ stepId: number; attempt: number; heldAt: string }>).map((h) => ({ stepId: Number(h.stepId), attempt: h.attempt, heldAt: new Date(h.heldAt) })),
  }));
}

/** Limits and current hold counts of the named pools that have a limit (absent = unlimited). */
export async function poolStateRead(db: Db, names: string[]): Promise<PoolState> {
  const state: PoolState = new Map();
  if (names.length === 0) return state;
  const { rows } = await db.query(
    `SELECT l.name, l.max_holders, (SELECT count(*) FROM pool_holds h WHERE h.pool = l.name) AS held
       FROM pool_limits l WHERE l.name = ANY($1::text[])`,
    [[...new Set(names)]],
  );
  for (const r of rows) state.set(r.name, { limit: r.max_holders, held: Number(r.held) });
  return state;
}

/**
 * Takes every hold the step demands or none; call inside the claim/deliver transaction. The limit
 * rows are locked FOR UPDATE in name order, so concurrent acquirers queue on the first shared pool
 * instead of deadlocking, and the count that follows sees every slot taken and committed before the lock was
 * granted. A step already holding a pool (a repeated call) keeps it and is not counted twice.
 */
export async function poolSlotTake(client: PoolClient, p: { stepId: number; attempt: number; pools: string[] }): Promise<boolean> {
  return (await poolSlotsTake(client, [p])).has(p.stepId);
}

/**
 * poolSlotTake for a whole tick's deliveries: the union of their limit rows is locked once, in
 * name order, before any slot is counted (locking step by step would take rows out of order across
 * steps and could deadlock with another replica). Steps are admitted in the order given, each all
 * or none; returns the step ids whose slots were taken (steps demanding no pool included).
 */
export async function poolSlotsTake(client: PoolClient, items: Array<{ stepId: number; attempt: number; pools: string[] }>): Promise<Set<number>> {
  const granted = new Set<number>();
  const names = [...new Set(items.flatMap((i) => i.pools))].sort();
  if (names.length === 0) return new Set(items.map((i) => i.stepId));
  const { rows: limitRows } = await client.query(`SELECT name, max_holders FROM pool_limits WHERE name = ANY($1::text[]) ORDER BY name FOR UPDATE`, [names]);
  const limits = new Map(limitRows.map((l) => [l.name as string, l.max_holders as number]));
  const held = new Map<string, Set<number>>();
  if (limits.size > 0) {
    const { rows } = await client.query(`SELECT pool, step_id FROM pool_holds WHERE pool = ANY($1::text[])`, [[...limits.keys()]]);
    for (const r of rows) {
      if (!held.has(r.pool)) held.set(r.pool, new Set());
      held.get(r.pool)!.add(Number(r.step_id));
    }
  }
  const inserts: Array<{ pool: string; stepId: number; attempt: number }> = [];
  for (const item of items) {
    const pools = [...new Set(item.pools)].sort();
    const fits = pools.every((name) => {
      const limit = limits.get(name);
      if (limit === undefined) return true;
      const holders = held.get(name) ?? new Set<number>();
      return holders.has(item.stepId) || holders.size < limit;
    });
    if (!fits) continue;
    granted.add(item.stepId);
    for (const name of pools) {
      if (!held.has(name)) held.set(name, new Set());
      held.get(name)!.add(item.stepId);
      inserts.push({ pool: name, stepId: item.stepId, attempt: item.attempt });
    }
  }
  if (inserts.length > 0) {
    await client.query(
      `INSERT INTO pool_holds (pool, step_id, attempt) SELECT * FROM unnest($1::text[], $2::bigint[], $3::int[])
       ON CONFLICT (pool, step_id) DO UPDATE SET attempt = EXCLUDED.attempt`,
      [inserts.map((i) => i.pool), inserts.map((i) => i.stepId), inserts.map((i) => i.attempt)],
    );
  }
  return granted;
}

/** Frees every pool slot of the steps (complete, release, expiry, cancel); returns how many went. */
export async function poolSlotsFree(db: Db, stepIds: number[]): Promise<number> {
  if (stepIds.length === 0) return 0;
  const { rowCount } = await db.query(`DELETE FROM pool_holds WHERE step_id = ANY($1::bigint[])`, [stepIds]);
  return rowCount ?? 0;
}
