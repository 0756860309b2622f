import type { PoolClient, Db } from './pool.js';

export interface HistoryPruned { runs: number; steps: number; logs: number }

/**
 * Deletes one batch of finished history: up to `limit` runs that finished more than
 * `retentionDays` ago by the store's clock, oldest first, with their steps and logs. A run still
 * running (no finished_at, status running) or with anything on the queue or under a lease is
 * never touched; rows another pruner holds are skipped. `now`, when given, stands for the store's
 * clock (tests set the time).
 */
export async function runHistoryPrune(client: PoolClient, p: { retentionDays: number; limit: number; now?: Date }): Promise<HistoryPruned> {
  const { rows: doomed } = await client.query(
    `SELECT id FROM runs r
      WHERE r.finished_at IS NOT NULL AND r.status <> 'running'
        AND r.finished_at < coalesce($3::timestamptz, now()) - $1 * interval '1 day'
        AND NOT EXISTS (SELECT 1 FROM steps s JOIN queue_ready q ON q.step_id = s.id WHERE s.run_id = r.id)
        AND NOT EXISTS (SELECT 1 FROM step_leases l WHERE l.run_id = r.id)
      ORDER BY r.finished_at, r.id
      LIMIT $2 FOR UPDATE SKIP LOCKED`,
    [p.retentionDays, p.limit, p.now ?? null],
  );
  const ids = doomed.map((r) => Number(r.id));
  if (ids.length === 0) return { runs: 0, steps: 0, logs: 0 };
  const logs = await client.query(`DELETE FROM step_logs l USING steps s WHERE l.step_id = s.id AND s.run_id = ANY($1::bigint[])`, [ids]);
  const steps = await client.query(`DELETE FROM steps WHERE run_id = ANY($1::bigint[])`, [ids]);
  // Spans owed that no replica claimed for as long (a cancel's, with traces off on every replica) go
  // with the history; a claimed row is claimable again a grace later, so a sent one never gets here.
  await client.query(`DELETE FROM trace_unsent WHERE claimable_at < now() - $1 * interval '1 day'`, [p.retentionDays]);
  const runs = await client.query(`DELETE FROM runs WHERE id = ANY($1::bigint[])`, [ids]);
  return { runs: runs.rowCount ?? 0, steps: steps.rowCount ?? 0, logs: logs.rowCount ?? 0 };
}

export interface TableSize { table: string; rows: number; bytes: number }

/** Every table of the store's schema with its estimated live rows and total size on disk (with indexes and TOAST), largest first. */
export async function storeTableSizes(db: Db): Promise<TableSize[]> {
  const { rows } = await db.query(
    `SELECT c.relname AS table, coalesce(s.n_live_tup, 0) AS rows, pg_total_relation_size(c.oid) AS bytes
       FROM pg_class c
       JOIN pg_namespace n ON n.oid = c.relnamespace
       LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
      WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema()
      ORDER BY pg_total_relation_size(c.oid) DESC, c.relname`,
  );
  return rows.map((r) => ({ table: r.table, rows: Number(r.rows), bytes: Number(r.bytes) }));
}
