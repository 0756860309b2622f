import type { CapacityLease, CapacityState } from '../core/capacity.js';
import type { PlacementRequirement } from '../core/entry.js';
import { fleetRead } from './fleet.js';
import { storeNow, type Pool } from './pool.js';
import { postureRead } from './posture.js';
import { mapEntry } from './queue.js';

/** How many ready entries, in claim order, a capacity read judges one by one; the rest by shape. */
export const CAPACITY_ENTRY_LIMIT = 20_000;

/**
 * Everything `fleet demand` and `fleet what-if` judge, from one REPEATABLE READ, read-only
 * snapshot (an entry is never both ready and leased in one answer): every ready entry in claim
 * order, every live lease, the fleet with its running loads, the groups, pools (limits and
 * holders), pins and out-counts of the runs on the queue, project names, the posture and now().
 * A queue deeper than `limit` is read in claim order up to it, and the rest counted by
 * (placement, pools, load) with its oldest ready_at, in SQL: a million entries never cross here.
 */
export async function capacityRead(pool: Pool, opts: { limit?: number } = {}): Promise<CapacityState> {
  const limit = opts.limit ?? CAPACITY_ENTRY_LIMIT;
  const client = await pool.connect();
  // A deep queue holds a handful of placement shapes: parse each once, and share the object.
  const shapes = new Map<string, PlacementRequirement | null>();
  const requirementOf = (text: string | null): PlacementRequirement | null => {
    if (text === null) return null;
    let req = shapes.get(text);
    if (req === undefined) shapes.set(text, (req = JSON.parse(text) as PlacementRequirement));
    return req;
  };
  let began = false;
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    began = true;
    const now = await storeNow(client);
    // What the verdicts and the planner read of an entry, and no more.
    const columns = `step_id, run_id, 0 AS shard, 1 AS attempt, 0 AS priority, NULL::text AS site_stamp, lane, fair_key, weight, pools, requirement::text AS requirement, load, run_scope, max_parallel, ready_at, position`;
    const deep = (await client.query(`SELECT count(*)::int AS n FROM (SELECT 1 FROM queue_ready LIMIT $1) x`, [limit + 1])).rows[0].n > limit;
    const ready = deep
      ? await client.query(`SELECT ${columns}, ready_at::text AS ready_key FROM queue_ready ORDER BY lane, ready_at, position LIMIT $1`, [limit])
      : await client.query(`SELECT ${columns} FROM queue_ready`);
    let tail: CapacityState['tail'] = [];
    if (deep) {
      // The last of the head in claim order, its time as the server's text (microseconds, not a Date's milliseconds).
      const last = ready.rows[ready.rows.length - 1];
      const { rows } = await client.query(
        `SELECT requirement::text AS requirement, pools, load, count(*)::int AS n, min(ready_at) AS oldest
           FROM queue_ready WHERE (lane, ready_at, position) > ($1, $2::timestamptz, $3)
          GROUP BY 1, 2, 3`,
        [last.lane, last.ready_key, last.position],
      );
      tail = rows.map((r) => ({ requirement: requirementOf(r.requirement), pools: r.pools ?? [], load: Number(r.load), count: r.n, oldestReadyAt: r.oldest }));
    }
    const leases = await client.query(`SELECT step_id, run_id, runner_id, executing, requirement, load FROM step_leases`);
    const runners = await fleetRead(client);
    const groups = await client.query(
      `SELECT name, attributes, exclusive FROM runner_groups
       UNION ALL
       SELECT DISTINCT group_name, '{}'::jsonb, false FROM runners
        WHERE deleted_at IS NULL AND group_name IS NOT NULL AND group_name NOT IN (SELECT name FROM runner_groups)`,
    );
    const pools = await client.query(
      `SELECT coalesce(l.name, h.pool) AS name, l.max_holders, coalesce(h.n, 0) AS held
         FROM pool_limits l FULL JOIN (SELECT pool, count(*)::int AS n FROM pool_holds GROUP BY pool) h ON h.pool = l.name`,
    );
    const pins = await client.query(`SELECT run_id, runner_id FROM run_pins`);
    const outstanding = await client.query(`SELECT run_id, count(*)::int AS n FROM step_leases GROUP BY run_id`);
    const projects = await client.query(`SELECT name FROM projects`);
    const posture = await postureRead(client);
    await client.query('COMMIT');
    began = false;
    return {
      now,
      tail,
      // In no particular order: the planner orders its claims itself, and views sort what they list.
      ready: ready.rows.map((r) => {
        r.requirement = requirementOf(r.requirement);
        return mapEntry(r);
      }),
      leases: leases.rows.map(
        (r): CapacityLease => ({ stepId: Number(r.step_id), runId: Number(r.run_id), runnerId: r.runner_id, executing: r.executing, requirement: r.requirement ?? null, load: Number(r.load) }),
      ),
      runners,
      groups: new Map(groups.rows.map((g) => [g.name as string, { attributes: (g.attributes ?? {}) as Record<string, string>, exclusive: Boolean(g.exclusive) }])),
      pools: new Map(pools.rows.map((p) => [p.name as string, { limit: p.max_holders === null ? null : Number(p.max_holders), held: Number(p.held) }])),
      pins: new Map(pins.rows.map((p) => [Number(p.run_id), p.runner_id as string])),
      outstandingByRun: new Map(outstanding.rows.map((o) => [Number(o.run_id), o.n as number])),
      projects: new Set(projects.rows.map((p) => p.name as string)),
      postures: { halted: posture.halted, fleetQuiesced: posture.fleetQuiesced, systemQuiesced: posture.systemQuiesced, reason: posture.reason },
    };
  } finally {
    if (began) await client.query('ROLLBACK').catch(() => undefined);
    client.release();
  }
}
