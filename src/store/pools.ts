import type { PoolState } from '../core/plan.js';
import type { Pool, PoolClient } from './pool.js';

type Db = Pool | PoolClient;

export interface PoolHolder { stepId: number; attempt: number; heldAt: Date }
export interface PoolRow {
  name: string;
  /** null: no limit row, the pool is unlimited (listed because something holds it). */
  limit: number | null;
  holders: PoolHolder[];
}

/** Sets (or changes) a pool's limit. Idempotent. */
export async function poolLimitSet(db: Db, p: { name: string; limit: number }): Promise<void> {
  await db.query(
    `INSERT INTO pool_limits (name, max_holders) VALUES ($1, $2)
     ON CONFLICT (name) DO UPDATE SET max_holders = EXCLUDED.max_holders, updated_at = now()`,
    [p.name, p.limit],
  );
}

/** Removes a pool's limit (the pool becomes unlimited); false when it had none. */
export async function poolLimitUnset(db: Db, p: { name: string }): Promise<boolean> {
  const { rowCount } = await db.query(`DELETE FROM pool_limits WHERE name = $1`, [p.name]);
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
 * instead of deadlocking, and the count that follows sees every hold committed before the lock was
 * granted. A step already holding a pool (a repeated call) keeps it and is not counted twice.
 */
export async function poolHoldAcquire(client: PoolClient, p: { stepId: number; attempt: number; pools: string[] }): Promise<boolean> {
  const pools = [...new Set(p.pools)].sort();
  if (pools.length === 0) return true;
  const { rows: limits } = await client.query(`SELECT name, max_holders FROM pool_limits WHERE name = ANY($1::text[]) ORDER BY name FOR UPDATE`, [pools]);
  if (limits.length > 0) {
    const { rows: counts } = await client.query(
      `SELECT pool, count(*) FILTER (WHERE step_id <> $2) AS others FROM pool_holds WHERE pool = ANY($1::text[]) GROUP BY pool`,
      [limits.map((l) => l.name), p.stepId],
    );
    const others = new Map(counts.map((c) => [c.pool as string, Number(c.others)]));
    if (limits.some((l) => (others.get(l.name) ?? 0) >= l.max_holders)) return false;
  }
  await client.query(
    `INSERT INTO pool_holds (pool, step_id, attempt) SELECT unnest($1::text[]), $2, $3
     ON CONFLICT (pool, step_id) DO UPDATE SET attempt = EXCLUDED.attempt`,
    [pools, p.stepId, p.attempt],
  );
  return true;
}

/** Releases every hold of the steps (complete, release, expiry, cancel); returns how many went. */
export async function poolHoldRelease(db: Db, stepIds: number[]): Promise<number> {
  if (stepIds.length === 0) return 0;
  const { rowCount } = await db.query(`DELETE FROM pool_holds WHERE step_id = ANY($1::bigint[])`, [stepIds]);
  return rowCount ?? 0;
}
