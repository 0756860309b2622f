import type { FinishedRunFacts, RunTraceFacts } from '../core/trace-spans.js';
import type { Pool, PoolClient } from './pool.js';

type Db = Pool | PoolClient;

/**
 * What the spans of attempts and runs read from the store, only when traces are on. Which
 * attempts and runs a transaction ended is known from the transaction itself (the orchestrator
 * reports them, so no other replica reports them too); their times, runners and traces are read
 * after its commit, off the path of the lease writes.
 */

/** The step of an attempt as it ended, with its run's trace and its runner. */
export interface EndedAttemptRow {
  run: RunTraceFacts;
  stepId: number;
  step: string;
  attempt: number;
  exitCode: number | null;
  cause: string | null;
  runnerId: string | null;
  runnerName: string | null;
  runnerGroup: string | null;
  logBytes: number;
  startedAt: Date | null;
  finishedAt: Date;
}

const runTrace = (r: any): RunTraceFacts => ({
  id: Number(r.run_id),
  name: r.run_name,
  project: r.project,
  traceId: r.trace_id ?? null,
  parentSpanId: r.trace_parent_span ?? null,
  parentFlags: r.trace_flags ?? null,
  round: r.trace_round,
});

const RUN_TRACE_COLS = `r.id AS run_id, r.name AS run_name, r.project, r.trace_id, r.trace_parent_span, r.trace_flags, r.trace_round`;

/**
 * Attempts as they ended, read after the commit that ended them: each (step, attempt) still with
 * the status it ended with (a step retried since has moved on and is left out).
 */
export async function traceAttemptsRead(db: Db, items: Array<{ stepId: number; attempt: number; status: string }>): Promise<EndedAttemptRow[]> {
  if (items.length === 0) return [];
  const { rows } = await db.query(
    `SELECT s.id, s.attempt, s.name, s.exit_code, s.cause, s.runner_id, s.log_bytes, s.started_at, s.finished_at,
            rn.name AS runner_name, rn.group_name, ${RUN_TRACE_COLS}
       FROM unnest($1::bigint[], $2::int[], $3::text[]) AS m(step_id, attempt, status)
       JOIN steps s ON s.id = m.step_id AND s.attempt = m.attempt AND s.status = m.status AND s.finished_at IS NOT NULL
       JOIN runs r ON r.id = s.run_id
       LEFT JOIN runners rn ON rn.id = s.runner_id`,
    [items.map((i) => i.stepId), items.map((i) => i.attempt), items.map((i) => i.status)],
  );
  return rows.map((r) => ({
    run: runTrace(r),
    stepId: Number(r.id),
    step: r.name,
    attempt: r.attempt,
    exitCode: r.exit_code,
    cause: r.cause,
    runnerId: r.runner_id,
    runnerName: r.runner_name ?? null,
    runnerGroup: r.group_name ?? null,
    logBytes: Number(r.log_bytes),
    startedAt: r.started_at,
    finishedAt: r.finished_at,
  }));
}

/** A step that went back to the queue as `attempt` (its previous attempt ended unfinished), with its run's trace. */
export async function traceStepRequeued(client: PoolClient, p: { stepId: number; attempt: number }): Promise<{ run: RunTraceFacts; step: string; now: Date } | undefined> {
  const { rows } = await client.query(
    `SELECT s.name, now() AS now, ${RUN_TRACE_COLS}
       FROM steps s JOIN runs r ON r.id = s.run_id
      WHERE s.id = $1 AND s.attempt = $2 AND s.status = 'ready'`,
    [p.stepId, p.attempt],
  );
  return rows[0] ? { run: runTrace(rows[0]), step: rows[0].name, now: rows[0].now } : undefined;
}

/** Runs a committed finish ended, as they ended (a run reopened since is left out). */
export async function traceRunsRead(db: Db, runIds: number[]): Promise<FinishedRunFacts[]> {
  if (runIds.length === 0) return [];
  const { rows } = await db.query(
    `SELECT ${RUN_TRACE_COLS}, r.status, r.cause, r.created_at, r.trace_round_at, r.finished_at, r.trigger_id, r.template_name,
            t.id AS tick_id, t.kind AS tick_kind, t.due_at AS tick_due_at, t.fired_at AS tick_fired_at, t.delivery_id, d.delivery_key, d.received_at
       FROM runs r
       -- The launch that created a triggered run, found through the ledger's (trigger_id, id) index.
       LEFT JOIN LATERAL (SELECT t.id, t.kind, t.due_at, t.fired_at, t.delivery_id FROM trigger_ticks t
                           WHERE r.trigger_id IS NOT NULL AND t.trigger_id = r.trigger_id AND t.run_id = r.id AND t.outcome = 'fired' LIMIT 1) t ON true
       LEFT JOIN webhook_deliveries d ON d.id = t.delivery_id
      WHERE r.id = ANY($1::bigint[]) AND r.status <> 'running' AND r.finished_at IS NOT NULL`,
    [runIds],
  );
  return rows.map((r) => ({
    ...runTrace(r),
    status: r.status,
    cause: r.cause,
    createdAt: r.created_at,
    roundAt: r.trace_round_at,
    finishedAt: r.finished_at,
    triggerId: r.trigger_id == null ? null : Number(r.trigger_id),
    templateName: r.template_name ?? null,
    launch:
      r.tick_id == null
        ? null
        : {
            tickId: Number(r.tick_id),
            kind: r.tick_kind,
            triggerId: Number(r.trigger_id),
            dueAt: r.received_at ?? r.tick_due_at,
            firedAt: r.tick_fired_at ?? r.created_at,
            deliveryId: r.delivery_id == null ? null : Number(r.delivery_id),
            deliveryKey: r.delivery_key ?? null,
          },
  }));
}

/** Marks a run cancelled in this transaction as one whose spans a replica with traces on sends. */
export async function traceRunUnsentMark(client: PoolClient, runId: number): Promise<void> {
  await client.query(`UPDATE runs SET trace_unsent = true WHERE id = $1`, [runId]);
}

/** Claims up to `limit` runs whose spans no replica sent yet: each claimed once, by one replica. */
export async function traceRunsUnsentClaim(db: Db, limit: number): Promise<number[]> {
  const { rows } = await db.query(
    `UPDATE runs SET trace_unsent = NULL
      WHERE id IN (SELECT id FROM runs WHERE trace_unsent ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
     RETURNING id`,
    [limit],
  );
  return rows.map((r) => Number(r.id));
}

/**
 * The attempts a cancel stopped while they ran, as the steps record them (their leases were revoked
 * with the cancel: the spans have the step's times, not the lease's).
 */
export async function traceCancelledAttemptsRead(db: Db, runIds: number[]): Promise<EndedAttemptRow[]> {
  if (runIds.length === 0) return [];
  const { rows } = await db.query(
    // Started in the run's current round: a step a retry made ready again keeps its last round's start.
    `SELECT s.id, s.attempt FROM runs r JOIN steps s ON s.run_id = r.id
      WHERE r.id = ANY($1::bigint[]) AND s.status = 'cancelled' AND s.finished_at IS NOT NULL
        AND s.started_at >= coalesce(r.trace_round_at, r.created_at)`,
    [runIds],
  );
  return traceAttemptsRead(db, rows.map((r) => ({ stepId: Number(r.id), attempt: r.attempt, status: 'cancelled' })));
}
