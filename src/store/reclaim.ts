import type { PoolClient } from './pool.js';
import { leaseCols, mapLease, type LeaseRow } from './leases.js';
import { ENTRY_COLS, entryColsBack, poolFreedNotify } from './queue.js';

export interface ReclaimedClaim {
  stepId: number;
  runId: number;
  holder: string;
  /** The attempt the dead replica held. */
  attempt: number;
  /** The attempt now on queue_ready: the same for an unexposed claim, attempt + 1 for an exposed one. */
  requeuedAttempt: number;
  /** True when the claim had been delivered to a runner's acquire (so a late holder must be fenced). */
  exposed: boolean;
  /** The lease as it was when taken back: its times, for the spans of the attempt it ended. */
  lease: LeaseRow;
}

/**
 * Takes back the un-acked claims of dead replicas (heartbeat older than the staleness window,
 * stopped, or no longer registered) in one statement, inside the caller's transaction:
 *
 *  - a claim never delivered goes back to queue_ready at its original attempt, ready_at and
 *    position: nobody outside saw it, so it is as if it had never been claimed;
 *  - a claim delivered but not acked comes back as attempt + 1 (still at its original position,
 *    since it has already waited its turn); the lease row is gone, so the late holder's ack,
 *    renewal or completion presents a token that no longer exists and is fenced.
 *
 * Acked or executing leases stay: their runner is working, and renews and completes on any
 * replica. Rows are locked with SKIP LOCKED, so several replicas sweeping at once split the
 * work instead of doing it twice. Pool holds of the reclaimed attempts are released with them.
 * Liveness is judged at `now` when given (tests set the time), else by the database clock.
 */
export async function claimReclaimDead(client: PoolClient, p: { me: string; stalenessMs: number; limit: number; now?: Date }): Promise<ReclaimedClaim[]> {
  const { rows } = await client.query(
    `WITH dead AS (
       SELECT l.step_id FROM step_leases l
        WHERE l.acked_at IS NULL AND NOT l.executing AND l.holder <> $1
          AND NOT EXISTS (SELECT 1 FROM replicas r
                           WHERE r.id = l.holder AND r.stopped_at IS NULL
                             AND r.heartbeat_at > coalesce($4::timestamptz, now()) - $2 * interval '1 millisecond')
        ORDER BY l.step_id
        LIMIT $3
        FOR UPDATE OF l SKIP LOCKED
     ), gone AS (
       DELETE FROM step_leases l USING dead WHERE l.step_id = dead.step_id RETURNING l.*
     ), holds AS (
       DELETE FROM pool_holds h USING gone WHERE h.step_id = gone.step_id AND h.attempt = gone.attempt RETURNING h.pool
     ), freed AS (
       SELECT ${poolFreedNotify('p.pool')} FROM (SELECT DISTINCT pool FROM holds) p
     ), back AS (
       INSERT INTO queue_ready (${ENTRY_COLS})
       SELECT ${entryColsBack('CASE WHEN delivered_at IS NULL THEN attempt ELSE attempt + 1 END')}
         FROM gone
       ON CONFLICT (step_id) DO NOTHING
       RETURNING step_id, attempt
     )
     SELECT ${leaseCols('g')}, b.attempt AS requeued_attempt, g.delivered_at IS NOT NULL AS exposed
       FROM gone g LEFT JOIN back b ON b.step_id = g.step_id CROSS JOIN (SELECT count(*) FROM freed) announced
      ORDER BY g.step_id`,
    [p.me, p.stalenessMs, p.limit, p.now ?? null],
  );
  return rows.map((r) => ({
    stepId: Number(r.step_id),
    runId: Number(r.run_id),
    holder: r.holder,
    attempt: r.attempt,
    requeuedAttempt: r.requeued_attempt ?? (r.exposed ? r.attempt + 1 : r.attempt),
    exposed: r.exposed,
    lease: mapLease(r),
  }));
}
