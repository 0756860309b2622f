import { storableText } from '../core/bounds.js';
import type { Pool, PoolClient } from './pool.js';

type Db = Pool | PoolClient;

export type LogStream = 'stdout' | 'stderr' | 'system';

export interface LogLine {
  id: number;
  stepId: number;
  step: string;
  attempt: number;
  stream: LogStream;
  text: string;
  at: Date;
}

/**
 * Appends a runner's output chunks to the step's current attempt. Output is arbitrary: a NUL or an
 * unpaired surrogate (which text and jsonb cannot hold) is stored visibly replaced (storableText). Nothing is written when the
 * attempt is not the step's current one or its log is sealed; returns how many chunks landed.
 * (The lease token is checked by the caller; this is the store's own guard.)
 */
export async function stepLogAppend(db: Db, p: { stepId: number; attempt: number; chunks: Array<{ stream: 'stdout' | 'stderr'; text: string }> }): Promise<number> {
  if (p.chunks.length === 0) return 0;
  const { rowCount } = await db.query(
    `INSERT INTO step_logs (step_id, attempt, stream, chunk)
     SELECT s.id, s.attempt, c.stream, c.text
       FROM steps s, jsonb_to_recordset($3::jsonb) AS c(ord int, stream text, text text)
      WHERE s.id = $1 AND s.attempt = $2 AND NOT s.log_sealed AND c.stream IN ('stdout', 'stderr')
      ORDER BY c.ord`,
    [p.stepId, p.attempt, JSON.stringify(p.chunks.map((c, ord) => ({ ord, stream: c.stream, text: storableText(c.text) })))],
  );
  return rowCount ?? 0;
}

/** A line from opschain itself (started, requeued, cancelled, sealed); written even to a sealed log. */
export async function stepLogSystem(db: Db, p: { stepId: number; attempt: number; text: string }): Promise<void> {
  await db.query(`INSERT INTO step_logs (step_id, attempt, stream, chunk) VALUES ($1, $2, 'system', $3)`, [p.stepId, p.attempt, p.text]);
}

/** The system line that opens an attempt's log, naming the runner it went to. */
export async function stepLogStarted(db: Db, p: { stepId: number; attempt: number; runnerId: string }): Promise<void> {
  await db.query(
    `INSERT INTO step_logs (step_id, attempt, stream, chunk)
     SELECT $1, $2::int, 'system', 'attempt ' || $2::int || ' started on runner ' || coalesce((SELECT name FROM runners WHERE id = $3), $3)`,
    [p.stepId, p.attempt, p.runnerId],
  );
}

/** Batch stepLogStarted: one system line per started attempt. */
export async function stepLogsStarted(db: Db, items: Array<{ stepId: number; attempt: number; runnerId: string }>): Promise<void> {
  if (items.length === 0) return;
  await db.query(
    `INSERT INTO step_logs (step_id, attempt, stream, chunk)
     SELECT m.step_id, m.attempt, 'system', 'attempt ' || m.attempt || ' started on runner ' || coalesce(r.name, m.runner_id)
       FROM unnest($1::bigint[], $2::int[], $3::text[]) AS m(step_id, attempt, runner_id)
       LEFT JOIN runners r ON r.id = m.runner_id`,
    [items.map((i) => i.stepId), items.map((i) => i.attempt), items.map((i) => i.runnerId)],
  );
}

/** Seals the step's log: later runner output for it is refused. */
export async function stepLogSeal(db: Db, p: { stepId: number }): Promise<void> {
  await db.query(`UPDATE steps SET log_sealed = true WHERE id = $1`, [p.stepId]);
}

/**
 * A run's log lines in write order, optionally one step's. `after` maps a step id to the last line
 * id already seen of that step: following per step, because two steps' appends commit in their own
 * transactions and a single cursor could step over a line that committed late.
 */
export async function stepLogRead(db: Db, p: { runId: number; step?: string; after?: Map<number, number>; limit?: number }): Promise<LogLine[]> {
  const after = [...(p.after ?? new Map<number, number>()).entries()];
  const { rows } = await db.query(
    `SELECT l.id, l.step_id, s.name, l.attempt, l.stream, l.chunk, l.at
       FROM step_logs l
       JOIN steps s ON s.id = l.step_id
       LEFT JOIN unnest($3::bigint[], $4::bigint[]) AS c(step_id, after_id) ON c.step_id = l.step_id
      WHERE s.run_id = $1 AND ($2::text IS NULL OR s.name = $2) AND l.id > coalesce(c.after_id, 0)
      ORDER BY l.id
      LIMIT $5`,
    [p.runId, p.step ?? null, after.map(([k]) => k), after.map(([, v]) => v), p.limit ?? 10_000],
  );
  return rows.map((r) => ({ id: Number(r.id), stepId: Number(r.step_id), step: r.name, attempt: r.attempt, stream: r.stream, text: r.chunk, at: r.at }));
}
