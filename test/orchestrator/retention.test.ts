import { describe, expect, it } from 'vitest';
import { historyPruneOnce, historyRetentionPass } from '../../src/orchestrator/retention.js';
import { storeTableSizes } from '../../src/store/retention.js';
import { useTestDatabase } from '../support/db.js';
import { createLogger } from '../../src/logger.js';

describe('history retention', () => {
  const db = useTestDatabase();
  const pool = () => db.current.pool;

  /** A run with two steps and a log line each, finished `ageDays` ago (or still running). */
  async function run(name: string, p: { ageDays: number; status: 'succeeded' | 'failed' | 'running' }): Promise<number> {
    const { rows } = await pool().query(
      `INSERT INTO runs (name, definition, status, created_at, finished_at)
       VALUES ($1, '{}', $2, now() - $3 * interval '1 day', CASE WHEN $2 = 'running' THEN NULL ELSE now() - $3 * interval '1 day' END) RETURNING id`,
      [name, p.status, p.ageDays],
    );
    const id = Number(rows[0].id);
    const steps = await pool().query(`INSERT INTO steps (run_id, name, command, status) VALUES ($1, 'a', 'true', 'succeeded'), ($1, 'b', 'true', $2) RETURNING id`, [id, p.status === 'running' ? 'running' : 'succeeded']);
    for (const s of steps.rows) await pool().query(`INSERT INTO step_logs (step_id, attempt, stream, chunk) VALUES ($1, 1, 'stdout', 'hello')`, [s.id]);
    return id;
  }
  const ids = async () => (await pool().query(`SELECT name FROM runs ORDER BY id`)).rows.map((r) => r.name);

  it('prunes finished runs past the retention in batches, with their steps and logs, and never a running one', async () => {
    for (let i = 0; i < 5; i++) await run(`old-${i}`, { ageDays: 40 + i, status: i % 2 ? 'failed' : 'succeeded' });
    const running = await run('old-running', { ageDays: 60, status: 'running' });
    await run('recent', { ageDays: 3, status: 'succeeded' });
    // A finished run whose step is somehow still queued is left alone too.
    const queued = await run('old-queued', { ageDays: 50, status: 'succeeded' });
    await pool().query(`INSERT INTO queue_ready (step_id, run_id, shard, attempt) SELECT id, run_id, 0, 1 FROM steps WHERE run_id = $1 LIMIT 1`, [queued]);

    const r = await historyPruneOnce(pool(), { retentionDays: 30, batchSize: 2, maxBatches: 2 });
    // Two batches of two: the oldest four finished runs; the fifth waits for the next pass.
    expect(r).toEqual({ runs: 4, steps: 8, logs: 8, batches: 2 });
    expect(await ids()).toEqual(['old-0', 'old-running', 'recent', 'old-queued']);

    const rest = await historyPruneOnce(pool(), { retentionDays: 30, batchSize: 2 });
    expect(rest).toEqual({ runs: 1, steps: 2, logs: 2, batches: 1 });
    expect(await ids()).toEqual(['old-running', 'recent', 'old-queued']);
    expect((await pool().query(`SELECT count(*)::int AS n FROM steps WHERE run_id = $1`, [running])).rows[0].n).toBe(2);
    expect((await pool().query(`SELECT count(*)::int AS n FROM step_logs`)).rows[0].n).toBe(6);

    // Nothing left to prune: a pass is a cheap no-op.
    expect(await historyPruneOnce(pool(), { retentionDays: 30 })).toEqual({ runs: 0, steps: 0, logs: 0, batches: 0 });
    // Four weeks on, the recent one is past the retention too, through the leader pass given that time.
    const { rows } = await pool().query(`SELECT now() + interval '28 days' AS t`);
    const leader = { pool: pool(), log: createLogger('silent', { pretty: false }), config: { runsRetentionDays: 30 } };
    expect((await historyRetentionPass(leader, { now: new Date(rows[0].t.getTime() - 2 * 86_400_000) })).runs).toBe(0);
    expect((await historyRetentionPass(leader, { now: rows[0].t })).runs).toBe(1);
    expect(await ids()).toEqual(['old-running', 'old-queued']);
  });

  it('reports every table with its rows and size', async () => {
    const sizes = await storeTableSizes(pool());
    const names = sizes.map((t) => t.table);
    for (const t of ['runs', 'steps', 'step_logs', 'queue_ready', 'audit_log', 'posture_holds']) expect(names).toContain(t);
    expect(sizes.every((t) => t.bytes > 0 && t.rows >= 0)).toBe(true);
    expect([...sizes].sort((a, b) => b.bytes - a.bytes).map((t) => t.bytes)).toEqual(sizes.map((t) => t.bytes));
  });
});
