import type { PoolClient } from './pool.js';

/**
 * Revokes every live lease of a run (cancel): its lease rows, and every pool hold of its steps,
 * go together. The runners holding them learn it as `lease expired or revoked` on their next
 * renew or log call and kill the step. Returns the revoked leases.
 */
export async function leaseRevokeRun(client: PoolClient, runId: number): Promise<Array<{ stepId: number; attempt: number; runnerId: string | null }>> {
  const { rows } = await client.query(
    `WITH revoked AS (
       DELETE FROM scheduler_job_leases WHERE run_id = $1 RETURNING step_id, attempt, runner_id
     ), released AS (
       DELETE FROM pool_holds h USING steps s WHERE s.id = h.step_id AND s.run_id = $1 RETURNING h.step_id
     )
     -- A data-modifying WITH runs to completion whether or not the outer query reads it.
     SELECT step_id, attempt, runner_id FROM revoked ORDER BY step_id`,
    [runId],
  );
  return rows.map((r) => ({ stepId: Number(r.step_id), attempt: r.attempt, runnerId: r.runner_id }));
}
