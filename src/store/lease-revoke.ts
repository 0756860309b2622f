import type { PoolClient, Db } from './pool.js';
import { poolFreedNotify } from './queue.js';

/**
 * NOTIFY channel of revoked leases; the payload is the runner id. Delivered at commit, so a
 * replica answering that runner's parked watch call sees the revocation when it checks.
 */
export const LEASES_REVOKED_CHANNEL = 'opschain_leases_revoked';

/**
 * Revokes every live lease of a run (cancel): its lease rows, and every pool hold of its steps,
 * go together. Each holding runner is notified (LEASES_REVOKED_CHANNEL): the replica holding its
 * watch call answers it and the runner kills the step at once; a runner that keeps no watch
 * learns it as `lease expired or revoked` on its next renew or log call. Returns the revoked leases.
 */
export async function leaseRevokeRun(client: PoolClient, runId: number): Promise<Array<{ stepId: number; attempt: number; runnerId: string | null }>> {
  const { rows } = await client.query(
    `WITH revoked AS (
       DELETE FROM step_leases WHERE run_id = $1 RETURNING step_id, attempt, runner_id
     ), released AS (
       DELETE FROM pool_holds h USING steps s WHERE s.id = h.step_id AND s.run_id = $1 RETURNING h.pool
     ), freed AS (
       SELECT ${poolFreedNotify('p.pool')} FROM (SELECT DISTINCT pool FROM released) p
     )
     -- A data-modifying WITH runs to completion whether or not the outer query reads it.
     SELECT step_id, attempt, runner_id,
            CASE WHEN runner_id IS NOT NULL THEN pg_notify('${LEASES_REVOKED_CHANNEL}', runner_id) END AS notified
       FROM revoked CROSS JOIN (SELECT count(*) FROM freed) announced ORDER BY step_id`,
    [runId],
  );
  return rows.map((r) => ({ stepId: Number(r.step_id), attempt: r.attempt, runnerId: r.runner_id }));
}

/** Of the leases a runner presents, the step ids it no longer holds (revoked, expired, re-issued). */
export async function leasesNotHeld(db: Db, p: { runnerId: string; items: Array<{ stepId: number; token: string }> }): Promise<number[]> {
  if (p.items.length === 0) return [];
  const { rows } = await db.query(
    `SELECT m.step_id FROM unnest($1::bigint[], $2::bigint[]) AS m(step_id, token)
      WHERE NOT EXISTS (SELECT 1 FROM step_leases l WHERE l.step_id = m.step_id AND l.token = m.token AND l.runner_id = $3)`,
    [p.items.map((i) => i.stepId), p.items.map((i) => i.token), p.runnerId],
  );
  return rows.map((r) => Number(r.step_id));
}
