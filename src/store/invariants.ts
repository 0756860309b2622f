import { withSnapshot, type Db, type Pool } from './pool.js';

export interface InvariantResult {
  name: string;
  /** What must hold, in words. */
  rule: string;
  violations: number;
  /** Up to five offending rows, as the query returned them. */
  sample: unknown[];
}

/**
 * The store's own consistency rules, each a query for the rows that break it. Read in one
 * REPEATABLE READ snapshot so a step moving between tables mid-read is never counted twice. Used
 * by the chaos tier after a fault storm; every count must be zero.
 */
const RULES: Array<{ name: string; rule: string; sql: string }> = [
  {
    name: 'lease_has_origin',
    rule: 'every live lease is the running attempt of an existing step of a running run',
    sql: `SELECT l.step_id, l.attempt, s.status, s.attempt AS step_attempt, r.status AS run_status
            FROM step_leases l LEFT JOIN steps s ON s.id = l.step_id LEFT JOIN runs r ON r.id = s.run_id
           WHERE s.id IS NULL OR s.attempt <> l.attempt OR s.status <> 'running' OR r.status <> 'running'`,
  },
  {
    name: 'queued_has_origin',
    rule: 'every ready entry is the ready attempt of an existing step of a running run',
    sql: `SELECT q.step_id, q.attempt, s.status, s.attempt AS step_attempt, r.status AS run_status
            FROM queue_ready q LEFT JOIN steps s ON s.id = q.step_id LEFT JOIN runs r ON r.id = s.run_id
           WHERE s.id IS NULL OR s.attempt <> q.attempt OR s.status <> 'ready' OR r.status <> 'running'`,
  },
  {
    name: 'ready_or_leased_not_both',
    rule: 'a step is never both on the queue and leased',
    sql: `SELECT q.step_id FROM queue_ready q JOIN step_leases l USING (step_id)`,
  },
  {
    name: 'finished_run_has_no_open_step',
    rule: 'no step of a finished run is pending, ready or running',
    sql: `SELECT s.id, s.status, r.id AS run_id, r.status AS run_status
            FROM steps s JOIN runs r ON r.id = s.run_id
           WHERE r.status <> 'running' AND s.status IN ('pending', 'ready', 'running')`,
  },
  {
    name: 'open_step_is_in_flight',
    rule: 'every ready step is queued and every running step is leased',
    sql: `SELECT s.id, s.status, s.attempt FROM steps s
           WHERE (s.status = 'ready' AND NOT EXISTS (SELECT 1 FROM queue_ready q WHERE q.step_id = s.id))
              OR (s.status = 'running' AND NOT EXISTS (SELECT 1 FROM step_leases l WHERE l.step_id = s.id))`,
  },
  {
    name: 'run_counter_matches',
    rule: "a run's open_steps equals its steps pending, ready or running",
    sql: `SELECT r.id, r.open_steps, count(s.id) FILTER (WHERE s.status IN ('pending', 'ready', 'running'))::int AS open
            FROM runs r LEFT JOIN steps s ON s.run_id = r.id
           GROUP BY r.id HAVING r.open_steps <> count(s.id) FILTER (WHERE s.status IN ('pending', 'ready', 'running'))`,
  },
  {
    name: 'step_counter_matches',
    rule: "a pending step's unmet_needs equals its needs not yet succeeded",
    sql: `SELECT d.id, d.unmet_needs, (SELECT count(*) FROM steps n WHERE n.run_id = d.run_id AND n.name = ANY(d.needs) AND n.status <> 'succeeded')::int AS unmet
            FROM steps d
           WHERE d.status = 'pending'
             AND d.unmet_needs <> (SELECT count(*) FROM steps n WHERE n.run_id = d.run_id AND n.name = ANY(d.needs) AND n.status <> 'succeeded')`,
  },
  {
    name: 'done_attempt_unique',
    rule: 'an attempt recorded done is never live again and never newer than its step',
    sql: `SELECT d.step_id, d.attempt, s.attempt AS step_attempt
            FROM completed_attempts d LEFT JOIN steps s ON s.id = d.step_id
           WHERE s.id IS NOT NULL AND (d.attempt > s.attempt
              OR EXISTS (SELECT 1 FROM queue_ready q WHERE q.step_id = d.step_id AND q.attempt = d.attempt)
              OR EXISTS (SELECT 1 FROM step_leases l WHERE l.step_id = d.step_id AND l.attempt = d.attempt))`,
  },
  {
    name: 'pool_hold_has_lease',
    rule: 'every pool hold belongs to a live lease',
    sql: `SELECT h.pool, h.step_id FROM pool_holds h WHERE NOT EXISTS (SELECT 1 FROM step_leases l WHERE l.step_id = h.step_id)`,
  },
];

export async function storeInvariants(pool: Pool): Promise<InvariantResult[]> {
  return withSnapshot(pool, async (client) => {
    const out: InvariantResult[] = [];
    for (const r of RULES) out.push(await check(client, r));
    return out;
  });
}

async function check(db: Db, r: { name: string; rule: string; sql: string }): Promise<InvariantResult> {
  const { rows } = await db.query(
    `WITH v AS (${r.sql})
     SELECT (SELECT count(*) FROM v)::int AS n, (SELECT coalesce(jsonb_agg(x), '[]'::jsonb) FROM (SELECT * FROM v LIMIT 5) x) AS sample`,
  );
  return { name: r.name, rule: r.rule, violations: rows[0].n, sample: rows[0].sample };
}
