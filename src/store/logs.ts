import { oneLine, prefixWithinBytes, storableText } from '../core/bounds.js';
import type { Db } from './pool.js';

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

/** The per-step cap when the caller names none: `logs.max_step_bytes`' default. */
export const DEFAULT_MAX_STEP_LOG_BYTES = 10 * 1024 * 1024;

export interface LogAppendResult {
  /** Chunks stored. */
  stored: number;
  /** The step's log reached its cap with this batch or before: the rest was dropped. */
  truncated: boolean;
}

/**
 * Appends a runner's output chunks to the step's current attempt. Nothing is written when the
 * attempt is not the step's current one or its log is sealed. Output is arbitrary: a NUL or an
 * unpaired surrogate (which text and jsonb cannot hold) is stored visibly replaced (storableText).
 * At most `maxBytes` per attempt are kept: the batch that crosses the cap is cut there and
 * followed by one system line saying so; later batches are dropped.
 * (The lease token is checked by the caller; this is the store's own guard.)
 */
export async function stepLogAppend(db: Db, p: { stepId: number; attempt: number; chunks: Array<{ stream: 'stdout' | 'stderr'; text: string }>; maxBytes?: number }): Promise<LogAppendResult> {
  const chunks = p.chunks.filter((c) => c.stream === 'stdout' || c.stream === 'stderr').map((c) => ({ stream: c.stream, text: storableText(c.text) }));
  if (chunks.length === 0) return { stored: 0, truncated: false };
  const cap = p.maxBytes ?? DEFAULT_MAX_STEP_LOG_BYTES;
  const size = chunks.reduce((n, c) => n + Buffer.byteLength(c.text), 0);
  // Count the batch against the attempt's budget first; no row: stale attempt, sealed, or already full.
  const { rows } = await db.query(
    `UPDATE steps SET log_bytes = CASE WHEN log_attempt = $2 THEN log_bytes ELSE 0 END + $3, log_attempt = $2
      WHERE id = $1 AND attempt = $2 AND NOT log_sealed AND (log_attempt <> $2 OR log_bytes < $4)
      RETURNING log_bytes - $3 AS before`,
    [p.stepId, p.attempt, size, cap],
  );
  if (!rows[0]) {
    const { rows: full } = await db.query(`SELECT 1 FROM steps WHERE id = $1 AND attempt = $2 AND NOT log_sealed AND log_attempt = $2 AND log_bytes >= $3`, [p.stepId, p.attempt, cap]);
    return { stored: 0, truncated: full.length > 0 };
  }
  let room = cap - Number(rows[0].before);
  const kept: typeof chunks = [];
  for (const c of chunks) {
    if (room <= 0) break;
    const n = Buffer.byteLength(c.text);
    const text = n <= room ? c.text : prefixWithinBytes(c.text, room);
    if (text) kept.push({ stream: c.stream, text });
    room -= n;
  }
  const truncated = room < 0;
  const lines = kept.map((c, ord) => ({ ord, stream: c.stream, text: c.text }));
  if (truncated) {
    lines.push({ ord: lines.length, stream: 'system' as never, text: `log truncated: this attempt's output passed ${formatBytes(cap)} (logs.max_step_bytes); the rest is dropped` });
  }
  const { rowCount } = await db.query(
    `INSERT INTO step_logs (step_id, attempt, stream, chunk)
     SELECT $1, $2, c.stream, c.text
       FROM jsonb_to_recordset($3::jsonb) AS c(ord int, stream text, text text)
      ORDER BY c.ord`,
    [p.stepId, p.attempt, JSON.stringify(lines)],
  );
  return { stored: Math.min(rowCount ?? 0, kept.length), truncated };
}

function formatBytes(n: number): string {
  if (n % (1024 * 1024) === 0) return `${n / (1024 * 1024)} MiB`;
  if (n % 1024 === 0) return `${n / 1024} KiB`;
  return `${n} bytes`;
}

/**
 * A line from opschain itself (requeued, retried, cancelled, sealed); written even to a sealed log.
 * Always one line: a runner's reason or cause inside it cannot start a line of its own.
 */
export async function stepLogSystem(db: Db, p: { stepId: number; attempt: number; text: string }): Promise<void> {
  await db.query(`INSERT INTO step_logs (step_id, attempt, stream, chunk) VALUES ($1, $2, 'system', $3)`, [p.stepId, p.attempt, storableText(oneLine(p.text))]);
}

/**
 * Reserves the id of the started line of the attempt a step starts (in the statement that starts
 * it, `steps.start_log_id`). The line itself is not written then: stepLogRead derives it.
 */
export const STEP_LOG_ID_RESERVE = `nextval('step_logs_id_seq')`;

/** The started line's text, as SQL over the attempt, the runner's name and its id. */
const startedText = (attempt: string, runnerName: string, runnerId: string) => `'attempt ' || ${attempt} || ' started on runner ' || coalesce(${runnerName}, ${runnerId})`;

/** How an attempt started, as the step row keeps it until the attempt goes back to the queue or is retried. */
export interface AttemptStart {
  stepId: number;
  attempt: number;
  /** The id reserved for its started line at the start. */
  logId: number;
  runnerId: string;
  startedAt: Date;
}

/**
 * Writes the started lines of attempts whose start their step row is about to forget (requeued,
 * retried), each under the id reserved at its start: the same line, in the same place, that
 * readers were shown while it was derived, so their cursors see it once. With `then`, a system
 * line (the requeue's own) goes in the same statement.
 */
export async function stepLogsStartedKeep(db: Db, starts: AttemptStart[], then?: { stepId: number; attempt: number; text: string }): Promise<void> {
  if (starts.length === 0 && !then) return;
  await db.query(
    `INSERT INTO step_logs (id, step_id, attempt, stream, chunk, at)
     SELECT m.log_id, m.step_id, m.attempt, 'system', ${startedText('m.attempt', 'r.name', 'm.runner_id')}, m.started_at
       FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::text[], $5::timestamptz[]) AS m(log_id, step_id, attempt, runner_id, started_at)
       LEFT JOIN runners r ON r.id = m.runner_id
     UNION ALL
     SELECT ${STEP_LOG_ID_RESERVE}, $6::bigint, $7::int, 'system', $8::text, now() WHERE $6::bigint IS NOT NULL`,
    [
      starts.map((s) => s.logId),
      starts.map((s) => s.stepId),
      starts.map((s) => s.attempt),
      starts.map((s) => s.runnerId),
      starts.map((s) => s.startedAt),
      then?.stepId ?? null,
      then?.attempt ?? null,
      then ? storableText(oneLine(then.text)) : null,
    ],
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
 *
 * The started line of each step's current attempt is derived from the step (attempt, runner,
 * started_at) under the id its start reserved (`start_log_id`); earlier attempts' started lines
 * were written under theirs when the attempt ended (stepLogsStartedKeep).
 */
export async function stepLogRead(db: Db, p: { runId: number; step?: string; after?: Map<number, number>; limit?: number }): Promise<LogLine[]> {
  const after = [...(p.after ?? new Map<number, number>()).entries()];
  // The derived line is placed by its reserved id, not by started_at: the id was taken by the
  // statement that started the step, so it is above every line of the step written before the
  // start committed and below every line of the attempt (runner output comes after the delivery
  // commits; the attempt's own system lines follow an UPDATE of the step, which waits for it).
  // That is where the stored line used to be, and it keeps the per-step id cursors exact: a
  // follower sees the line once, under the same id before and after it is written, and cannot
  // pass it before it exists. Times cannot do this: now() is a transaction's start, not its
  // commit order, and a cursor of ids could not say whether a line placed by time was seen.
  const { rows } = await db.query(
    `WITH c AS (SELECT * FROM unnest($3::bigint[], $4::bigint[]) AS c(step_id, after_id))
     SELECT id, step_id, name, attempt, stream, chunk, at FROM (
       SELECT l.id, l.step_id, s.name, l.attempt, l.stream, l.chunk, l.at
         FROM step_logs l
         JOIN steps s ON s.id = l.step_id
         LEFT JOIN c ON c.step_id = l.step_id
        WHERE s.run_id = $1 AND ($2::text IS NULL OR s.name = $2) AND l.id > coalesce(c.after_id, 0)
       UNION ALL
       SELECT s.start_log_id, s.id, s.name, s.attempt, 'system', ${startedText('s.attempt', 'r.name', 's.runner_id')}, s.started_at
         FROM steps s
         LEFT JOIN runners r ON r.id = s.runner_id
         LEFT JOIN c ON c.step_id = s.id
        WHERE s.run_id = $1 AND ($2::text IS NULL OR s.name = $2) AND s.start_log_id > coalesce(c.after_id, 0)
     ) lines
     ORDER BY id
     LIMIT $5`,
    [p.runId, p.step ?? null, after.map(([k]) => k), after.map(([, v]) => v), p.limit ?? 10_000],
  );
  return rows.map((r) => ({ id: Number(r.id), stepId: Number(r.step_id), step: r.name, attempt: r.attempt, stream: r.stream, text: r.chunk, at: r.at }));
}
