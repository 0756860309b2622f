import type { Db } from './pool.js';

/** The store-wide facts a /metrics scrape reports, each aggregated to a bounded set of labels. */
export interface GaugeSnapshot {
  /** Live leases by stage: claimed (not yet delivered), delivered (not acked), executing. */
  leases: { claimed: number; delivered: number; executing: number };
  /** Per pool defined with `pools set`: current holds and the limit. */
  pools: Array<{ name: string; holds: number; limit: number }>;
  /**
   * Holds of pools never defined, all together: a run file may name any pool, and each name must
   * not become a series of its own on the open endpoint.
   */
  undefinedPoolOccupants: number;
  /** Registered runners by liveness state, and how many are drained (themselves or by group). */
  runners: { byState: Record<string, number>; drained: number };
}

/**
 * One statement, three set-based aggregates: the live leases by stage, pool holds against
 * limits, and the runner registry by state. (Queue depth per lane is queueLaneDepth's, the read
 * `admin queue` shows.)
 */
export async function gaugeSnapshotRead(db: Db): Promise<GaugeSnapshot> {
  const { rows } = await db.query(
    `SELECT
       (SELECT json_build_object(
                 'claimed', count(*) FILTER (WHERE delivered_at IS NULL),
                 'delivered', count(*) FILTER (WHERE delivered_at IS NOT NULL AND NOT executing),
                 'executing', count(*) FILTER (WHERE executing))
          FROM step_leases) AS leases,
       (SELECT coalesce(json_agg(json_build_object('name', l.name, 'holds', coalesce(h.n, 0), 'limit', l.max_holders) ORDER BY l.name), '[]'::json)
          FROM pool_limits l
          LEFT JOIN (SELECT pool, count(*) AS n FROM pool_holds GROUP BY pool) h ON h.pool = l.name) AS pools,
       (SELECT count(*) FROM pool_holds h WHERE NOT EXISTS (SELECT 1 FROM pool_limits l WHERE l.name = h.pool)) AS undefined_pool_holds,
       (SELECT json_build_object(
                 'byState', coalesce((SELECT json_object_agg(state, n) FROM (SELECT state, count(*) AS n FROM runners WHERE deleted_at IS NULL GROUP BY state) s), '{}'::json),
                 'drained', (SELECT count(*) FROM runners r LEFT JOIN runner_groups g ON g.name = r.group_name
                              WHERE r.deleted_at IS NULL AND (r.drained OR coalesce(g.drained, false))))) AS runners`,
  );
  const r = rows[0];
  return {
    leases: { claimed: Number(r.leases.claimed), delivered: Number(r.leases.delivered), executing: Number(r.leases.executing) },
    pools: (r.pools as Array<{ name: string; holds: number; limit: number }>).map((p) => ({ name: p.name, holds: Number(p.holds), limit: Number(p.limit) })),
    undefinedPoolOccupants: Number(r.undefined_pool_holds),
    runners: { byState: Object.fromEntries(Object.entries(r.runners.byState as Record<string, number>).map(([k, v]) => [k, Number(v)])), drained: Number(r.runners.drained) },
  };
}
