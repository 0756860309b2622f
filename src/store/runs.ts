import type { Classification, PlacementRequirement } from '../core/entry.js';
import { RUN_STATUSES, type RunStatus } from '../core/run-status.js';
import type { RunDefinition } from '../core/runfile.js';
import { textArrayOrNullSql } from './arrays.js';
import { STEP_LOG_ID_RESERVE, type AttemptStart } from './logs.js';
import { storeNow, withSnapshot, type Pool, type PoolClient, type Db } from './pool.js';
import { prepared } from './prepared.js';
import { ENQUEUED_COLUMNS, projectWeightSql, QUEUE_CHANNEL } from './queue.js';

export { RUN_STATUSES, type RunStatus };
export const STEP_STATUSES = ['pending', 'ready', 'running', 'succeeded', 'failed', 'system_error', 'skipped', 'cancelled'] as const;
export type StepStatus = (typeof STEP_STATUSES)[number];

export interface RunRow extends Omit<RunDefinition, 'steps'> {
  id: number;
  definition: Record<string, unknown>;
  status: RunStatus;
  cause: string | null;
  createdBy: string | null;
  createdAt: Date;
  finishedAt: Date | null;
  /** The run's trace: its id (null for a run stored before traces), the caller's span and flags, and its round (retries). */
  trace: { traceId: string | null; parentSpanId: string | null; parentFlags: number | null; round: number };
  /** The template (and its version) and trigger the run was started from; null for a run submitted as a file; absent when the read did not select them. */
  template?: { name: string; version: number | null; triggerId: number | null } | null;
}

export interface StepRow {
  id: number;
  runId: number;
  name: string;
  command: string;
  needs: string[];
  /** The effective environment: the run's env overlaid by the step's own. */
  env: Record<string, string>;
  timeoutMs: number | null;
  placement: PlacementRequirement | null;
  pools: string[];
  load: number;
  priority: number | null;
  status: StepStatus;
  attempt: number;
  runnerId: string | null;
  /** The runner's registered name, when the row was read with it. */
  runnerName: string | null;
  exitCode: number | null;
  cause: string | null;
  startedAt: Date | null;
  finishedAt: Date | null;
  logSealed: boolean;
  /** How many steps of the run need this one. */
  dependents: number;
}

export const mapRun = (r: any): RunRow => ({
  id: Number(r.id),
  name: r.name,
  project: r.project,
  target: r.target,
  scope: r.scope,
  maxParallelSteps: r.max_parallel_steps,
  priority: r.priority,
  env: r.env ?? {},
  placement: r.placement,
  definition: r.definition,
  status: r.status,
  cause: r.cause,
  createdBy: r.created_by,
  createdAt: r.created_at,
  finishedAt: r.finished_at,
  trace: { traceId: r.trace_id ?? null, parentSpanId: r.trace_parent_span ?? null, parentFlags: r.trace_flags ?? null, round: r.trace_round ?? 0 },
  ...(r.template_name !== undefined
    ? { template: r.template_name === null ? null : { name: r.template_name, version: r.template_version ?? null, triggerId: r.trigger_id == null ? null : Number(r.trigger_id) } }
    : {}),
});

export const mapStep = (r: any): StepRow => ({
  id: Number(r.id),
  runId: Number(r.run_id),
  name: r.name,
  command: r.command,
  needs: r.needs ?? [],
  env: r.env ?? {},
  timeoutMs: r.timeout_ms,
  placement: r.placement,
  pools: r.pools ?? [],
  load: Number(r.load),
  priority: r.priority,
  status: r.status,
  attempt: r.attempt,
  runnerId: r.runner_id,
  runnerName: r.runner_name ?? null,
  exitCode: r.exit_code,
  cause: r.cause,
  startedAt: r.started_at,
  finishedAt: r.finished_at,
  logSealed: r.log_sealed,
  dependents: r.dependents ?? 0,
});

/** A run to insert with its steps, its root steps' queue classification, and its audit row. */
export interface RunToQueue {
  definition: RunDefinition;
  source: Record<string, unknown>;
  createdBy: string | null;
  /**
   * Root step name → its classification: queued at once as attempt 1. The statement sets what
   * the store decides itself: the run's shard (from its id) and the weight (the project's).
   */
  queue: Map<string, Classification>;
  /** The audit row; its target is the run, named by the id the statement takes. */
  audit: { actor: string; action: string; source: string | null; detail: Record<string, unknown> };
  /** The caller's trace context (a traceparent given at submit): the run joins that trace. */
  trace?: { traceId: string; spanId: string; flags: number };
}

const RUNS_INSERT_QUEUED = prepared(
  `WITH ids AS (
       -- Materialised once (nextval is volatile): each run its id, in the order given.
       SELECT x.*, nextval(pg_get_serial_sequence('runs', 'id')) AS id
         FROM jsonb_to_recordset($1::jsonb) AS x(ord int, name text, project text, target text, scope text, max_parallel_steps int,
                priority smallint, env jsonb, placement jsonb, definition jsonb, created_by text, open_steps int,
                audit_actor text, audit_action text, audit_source text, audit_detail jsonb,
                trace_id text, trace_parent_span text, trace_flags smallint)
        ORDER BY x.ord
     ), r AS (
       INSERT INTO runs (id, name, project, target, scope, max_parallel_steps, priority, env, placement, definition, created_by, open_steps,
                         trace_id, trace_parent_span, trace_flags)
       SELECT id, name, project, target, scope, max_parallel_steps, priority, env, placement, definition, created_by, open_steps,
              coalesce(trace_id, replace(gen_random_uuid()::text, '-', '')), trace_parent_span, trace_flags
         FROM ids ORDER BY ord
       RETURNING id
     ), x AS (
       SELECT ids.id AS run_id, x.* FROM jsonb_to_recordset($2::jsonb) AS x(run_ord int, ord int, name text, command text, needs jsonb, env jsonb,
                timeout_ms int, placement jsonb, pools jsonb, load real, priority smallint, unmet_needs int, dependents int, queued boolean,
                q_priority smallint, lane smallint, fair_key text, q_pools jsonb, requirement jsonb, q_load real, run_scope boolean,
                max_parallel int, site_stamp text)
         JOIN ids ON ids.ord = x.run_ord
     ), s AS (
       INSERT INTO steps (run_id, name, command, needs, env, timeout_ms, placement, pools, load, priority, unmet_needs, dependents, status, attempt)
       SELECT x.run_id, x.name, x.command, ${textArrayOrNullSql('x.needs')}, x.env, x.timeout_ms, x.placement,
              ${textArrayOrNullSql('x.pools')}, x.load, x.priority, x.unmet_needs, x.dependents,
              CASE WHEN x.queued THEN 'ready' ELSE 'pending' END, CASE WHEN x.queued THEN 1 ELSE 0 END
         FROM x ORDER BY x.run_id, x.ord
       RETURNING id, run_id, name
     ), q AS (
       INSERT INTO queue_ready (${ENQUEUED_COLUMNS.join(', ')})
       SELECT s.id, s.run_id, run_shard(s.run_id), 1, x.q_priority, x.lane, x.fair_key,
              ${projectWeightSql('x.fair_key')}, ${textArrayOrNullSql('x.q_pools')},
              x.requirement, x.q_load, x.run_scope, x.max_parallel, x.site_stamp
         FROM s JOIN x ON x.run_id = s.run_id AND x.name = s.name
        WHERE x.queued
        ORDER BY s.id
       RETURNING step_id, run_id
     ), a AS (
       INSERT INTO audit_log (actor, action, target, source, detail)
       SELECT audit_actor, audit_action, 'run:' || id, audit_source, audit_detail FROM ids ORDER BY ord
     )
     SELECT ids.ord, ids.id AS run_id, qs.name, qs.step_id, qs.woke
       FROM ids
       LEFT JOIN (SELECT q.run_id, s.name, q.step_id, pg_notify('${QUEUE_CHANNEL}', '') IS NULL AS woke FROM q JOIN s ON s.id = q.step_id) qs
              ON qs.run_id = ids.id
      ORDER BY ids.ord, qs.step_id`,
);

/**
 * Inserts runs, their steps, the queue rows of their root steps (ready as attempt 1) and their
 * audit rows, and wakes the dispatchers, in one statement: one round trip, atomic by itself, for
 * one run or many. The runs take their ids from the sequence here. Returns, in the order given,
 * each run's id and its queued step names.
 */
export async function runsInsertQueued(db: Db, runs: RunToQueue[]): Promise<Array<{ runId: number; ready: string[] }>> {
  if (runs.length === 0) return [];
  const runRows = runs.map((r, ord) => {
    const d = r.definition;
    return {
      ord, name: d.name, project: d.project, target: d.target, scope: d.scope, max_parallel_steps: d.maxParallelSteps, priority: d.priority,
      env: d.env, placement: d.placement ?? null, definition: r.source, created_by: r.createdBy, open_steps: d.steps.length,
      audit_actor: r.audit.actor, audit_action: r.audit.action, audit_source: r.audit.source, audit_detail: r.audit.detail,
      ...(r.trace ? { trace_id: r.trace.traceId, trace_parent_span: r.trace.spanId, trace_flags: r.trace.flags } : {}),
    };
  });
  const stepRows = runs.flatMap((r, runOrd) => {
    const d = r.definition;
    return d.steps.map((s, ord) => {
      const q = r.queue.get(s.name);
      return {
        run_ord: runOrd, ord, name: s.name, command: s.run, needs: s.needs, env: { ...d.env, ...s.env }, timeout_ms: s.timeoutMs, placement: s.placement,
        pools: s.pools, load: s.load, priority: s.priority, unmet_needs: new Set(s.needs).size, dependents: d.steps.filter((o) => o.needs.includes(s.name)).length,
        queued: q !== undefined,
        ...(q ? { q_priority: q.priority, lane: q.lane, fair_key: q.fairKey, q_pools: q.pools, requirement: q.requirement, q_load: q.load, run_scope: q.runScope, max_parallel: q.maxParallel, site_stamp: q.siteStamp } : {}),
      };
    });
  });
  const { rows } = await db.query(RUNS_INSERT_QUEUED([JSON.stringify(runRows), JSON.stringify(stepRows)]));
  const out = runs.map(() => ({ runId: 0, ready: [] as string[] }));
  for (const r of rows) {
    const run = out[r.ord];
    run.runId = Number(r.run_id);
    if (r.name !== null) run.ready.push(r.name);
  }
  return out;
}

/** What classify reads of a run. */
export type RunToClassify = Pick<RunRow, 'id' | 'project' | 'priority' | 'scope' | 'maxParallelSteps' | 'placement' | 'target'>;

const RUNS_TO_CLASSIFY = prepared(`SELECT id, project, priority, scope, max_parallel_steps, placement, target FROM runs WHERE id = ANY($1::bigint[])`);

/** Several runs, as classify reads them, in one read (unlocked): not their definitions, env or payloads. */
export async function runsToClassify(db: Db, runIds: number[]): Promise<RunToClassify[]> {
  if (runIds.length === 0) return [];
  const { rows } = await db.query(RUNS_TO_CLASSIFY([runIds]));
  return rows.map(mapRun);
}

export async function runGet(db: Db, runId: number): Promise<RunRow | null> {
  const { rows } = await db.query(`SELECT * FROM runs WHERE id = $1`, [runId]);
  return rows[0] ? mapRun(rows[0]) : null;
}

/**
 * Locks the run row for the rest of the transaction. Every transition of a run's steps takes
 * this lock first, so two siblings finishing at once cannot both miss the dependent they free.
 */
export async function runLock(client: PoolClient, runId: number): Promise<RunRow | null> {
  const { rows } = await client.query(`SELECT * FROM runs WHERE id = $1 FOR UPDATE`, [runId]);
  return rows[0] ? mapRun(rows[0]) : null;
}

/** A run's steps in insertion (file) order, with each runner's name. */
export async function runSteps(db: Db, runId: number): Promise<StepRow[]> {
  const { rows } = await db.query(
    `SELECT s.*, r.name AS runner_name FROM steps s LEFT JOIN runners r ON r.id = s.runner_id WHERE s.run_id = $1 ORDER BY s.id`,
    [runId],
  );
  return rows.map(mapStep);
}

export interface RunSummary {
  id: number;
  name: string;
  project: string;
  target: string | null;
  status: RunStatus;
  cause: string | null;
  createdBy: string | null;
  createdAt: Date;
  finishedAt: Date | null;
  steps: { total: number } & Record<StepStatus, number>;
}

/** Runs newest first; `before` pages on from an earlier page's last id. */
export async function runList(db: Db, p: { status?: RunStatus; project?: string; limit: number; before?: number }): Promise<RunSummary[]> {
  const { rows } = await db.query(
    `SELECT r.*, c.counts
       FROM runs r
       CROSS JOIN LATERAL (
         SELECT jsonb_object_agg(status, n) AS counts FROM (SELECT status, count(*)::int AS n FROM steps WHERE run_id = r.id GROUP BY status) g
       ) c
      WHERE ($1::text IS NULL OR r.status = $1)
        AND ($2::text IS NULL OR r.project = $2)
        AND ($3::bigint IS NULL OR r.id < $3)
      ORDER BY r.id DESC
      LIMIT $4`,
    [p.status ?? null, p.project ?? null, p.before ?? null, p.limit],
  );
  return rows.map((r) => {
    const counts = (r.counts ?? {}) as Record<string, number>;
    const steps = Object.fromEntries(STEP_STATUSES.map((s) => [s, counts[s] ?? 0])) as Record<StepStatus, number>;
    const total = Object.values(steps).reduce((a, b) => a + b, 0);
    return {
      id: Number(r.id),
      name: r.name,
      project: r.project,
      target: r.target,
      status: r.status,
      cause: r.cause,
      createdBy: r.created_by,
      createdAt: r.created_at,
      finishedAt: r.finished_at,
      steps: { total, ...steps },
    };
  });
}

export async function stepGet(db: Db, stepId: number): Promise<StepRow | null> {
  const { rows } = await db.query(`SELECT * FROM steps WHERE id = $1`, [stepId]);
  return rows[0] ? mapStep(rows[0]) : null;
}

export async function stepsWithStatus(db: Db, p: { runId: number; status: StepStatus }): Promise<StepRow[]> {
  const { rows } = await db.query(`SELECT * FROM steps WHERE run_id = $1 AND status = $2 ORDER BY id`, [p.runId, p.status]);
  return rows.map(mapStep);
}

/**
 * The step's attempt was delivered: running on that runner, its started line's id reserved (read
 * from the step by stepLogRead, not written). False for a stale attempt or a finished step.
 */
export async function stepStart(client: PoolClient, p: { stepId: number; attempt: number; runnerId: string }): Promise<boolean> {
  return (await stepsStart(client, [p])) > 0;
}

/**
 * Starts delivered attempts, the rows of `delivered` (a from-item aliased `m` with step_id,
 * attempt and runner_id): each step running on its runner, its started line's id reserved (read
 * from the step by stepLogRead, not written). A stale attempt or a finished step is left alone.
 * A statement of its own (stepsStart), or one more part of the delivery that made the leases.
 */
export const stepsStartSql = (delivered: string) =>
  `UPDATE steps s SET status = 'running', runner_id = m.runner_id, started_at = now(), finished_at = NULL, start_log_id = ${STEP_LOG_ID_RESERVE}
       FROM ${delivered}
      WHERE s.id = m.step_id AND s.attempt = m.attempt AND s.status IN ('ready', 'running')`;

const STEPS_START = prepared(stepsStartSql('unnest($1::bigint[], $2::int[], $3::text[]) AS m(step_id, attempt, runner_id)'));

/** Batch stepStart: returns how many of the attempts were current and are now running. */
export async function stepsStart(client: PoolClient, items: Array<{ stepId: number; attempt: number; runnerId: string }>): Promise<number> {
  if (items.length === 0) return 0;
  const { rowCount } = await client.query(STEPS_START([items.map((i) => i.stepId), items.map((i) => i.attempt), items.map((i) => i.runnerId)]));
  return rowCount ?? 0;
}

/** Records how the attempt ended; null when the attempt is stale or the step already finished. */
export async function stepFinish(
  client: PoolClient,
  p: { stepId: number; attempt: number; status: 'succeeded' | 'failed' | 'system_error'; exitCode: number | null; cause: string | null; runnerId: string | null; seal: boolean },
): Promise<StepRow | null> {
  const { rows } = await client.query(
    `UPDATE steps SET status = $3, exit_code = $4, cause = $5, runner_id = coalesce($6, runner_id),
            started_at = coalesce(started_at, now()), finished_at = now(), log_sealed = log_sealed OR $7
      WHERE id = $1 AND attempt = $2 AND status IN ('ready', 'running')
     RETURNING *`,
    [p.stepId, p.attempt, p.status, p.exitCode, p.cause, p.runnerId, p.seal],
  );
  return rows[0] ? mapStep(rows[0]) : null;
}

/**
 * CTEs l and c: the runs in `counts` (id, n) locked in id order (one global order, so concurrent
 * roll-ups never deadlock on runs), then their open counts lowered by n; c returns each run's
 * id, status and open count after. The update reads its counts from l alone: joined with
 * `counts` as well, the planner rescanned one list per row of the other (quadratic in the runs
 * of a group).
 */
const closeRunsCtes = (counts: string) =>
  `l AS (SELECT r.id, ${counts}.n FROM runs r JOIN ${counts} USING (id) ORDER BY r.id FOR NO KEY UPDATE OF r),
        c AS (UPDATE runs r SET open_steps = r.open_steps - l.n FROM l WHERE r.id = l.id
              RETURNING r.id, r.status, r.open_steps)`;

const STEPS_FINISH_CLOSE = prepared(
  `WITH m AS (SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::int[], $5::text[], $6::text[], $7::boolean[])
                AS m(step_id, attempt, status, exit_code, cause, runner_id, seal)),
        f AS (UPDATE steps s SET status = m.status, exit_code = m.exit_code, cause = m.cause, runner_id = coalesce(m.runner_id, s.runner_id),
                     started_at = coalesce(s.started_at, now()), finished_at = now(), log_sealed = s.log_sealed OR m.seal
                FROM m
               WHERE s.id = m.step_id AND s.attempt = m.attempt AND s.status IN ('ready', 'running')
              RETURNING s.id, s.run_id, s.name, s.status, s.attempt, s.dependents),
        n AS (SELECT run_id AS id, count(*)::int AS n FROM f GROUP BY run_id),
        ${closeRunsCtes('n')}
   SELECT false AS run, f.id, f.run_id, f.name, f.status, f.attempt, f.dependents, NULL::int AS open_steps FROM f
   UNION ALL
   SELECT true, c.id, NULL, NULL, c.status, NULL, NULL, c.open_steps FROM c`,
);

/** What the roll-up reads of a finished step. */
export type FinishedStep = Pick<StepRow, 'id' | 'runId' | 'name' | 'status' | 'attempt' | 'dependents'>;

/** A run's open-step count after a roll-up statement took some off (runsCloseSteps, stepsFinishClose). */
export interface ClosedRun { id: number; status: RunStatus; openSteps: number }

/** Rows of closeRunsCtes' c as ClosedRuns, in run id order. */
const closedRuns = (rows: any[]): ClosedRun[] => rows.map((r) => ({ id: Number(r.id), status: r.status as RunStatus, openSteps: r.open_steps })).sort((a, b) => a.id - b.id);

/**
 * Batch stepFinish, and the finished steps counted off their runs, in one statement: the steps
 * whose attempt was current, and each of their runs with its open count after (rows locked in
 * id order after the steps, as runsCloseSteps does). Stale attempts, duplicates and steps already
 * ended are left alone and counted nowhere.
 */
export async function stepsFinishClose(
  client: PoolClient,
  items: Array<{ stepId: number; attempt: number; status: 'succeeded' | 'failed' | 'system_error'; exitCode: number | null; cause: string | null; runnerId: string | null; seal: boolean }>,
): Promise<{ finished: FinishedStep[]; runs: ClosedRun[] }> {
  if (items.length === 0) return { finished: [], runs: [] };
  const { rows } = await client.query(
    STEPS_FINISH_CLOSE([
      items.map((i) => i.stepId),
      items.map((i) => i.attempt),
      items.map((i) => i.status),
      items.map((i) => i.exitCode),
      items.map((i) => i.cause),
      items.map((i) => i.runnerId),
      items.map((i) => i.seal),
    ]),
  );
  return {
    finished: rows.filter((r) => !r.run).map((r) => ({ id: Number(r.id), runId: Number(r.run_id), name: r.name, status: r.status, attempt: r.attempt, dependents: r.dependents ?? 0 })),
    runs: closedRuns(rows.filter((r) => r.run)),
  };
}

/** The start the step row kept for its attempt (as `old_*` columns), or null when it has none. */
function keptStart(r: any): AttemptStart | null {
  if (r.old_start_log_id === null || r.old_runner_id === null) return null;
  return { stepId: Number(r.id), attempt: r.old_attempt, logId: Number(r.old_start_log_id), runnerId: r.old_runner_id, startedAt: r.old_started_at };
}

/**
 * The attempt went back to the queue (as a new attempt, or the same one when nothing external saw
 * it): ready again, no runner. Returns the step and the start of the attempt that ended, which the
 * row forgets here (for stepLogsStartedKeep); null for a stale attempt or a finished step.
 */
export async function stepRequeue(client: PoolClient, p: { stepId: number; fromAttempt: number; toAttempt: number }): Promise<{ step: StepRow; ended: AttemptStart | null } | null> {
  // The old values come from the row as the subquery locked it (NO KEY, as the UPDATE itself
  // would: log inserts referencing the step are not held up; and only when it matches, as well).
  const { rows } = await client.query(
    `UPDATE steps s SET attempt = $3, status = 'ready', runner_id = NULL, started_at = NULL, exit_code = NULL, cause = NULL, start_log_id = NULL
       FROM (SELECT id, attempt, runner_id, started_at, start_log_id FROM steps
              WHERE id = $1 AND attempt = $2 AND status IN ('ready', 'running') FOR NO KEY UPDATE) old
      WHERE s.id = old.id AND s.attempt = $2 AND s.status IN ('ready', 'running')
     RETURNING s.*, old.attempt AS old_attempt, old.runner_id AS old_runner_id, old.started_at AS old_started_at, old.start_log_id AS old_start_log_id`,
    [p.stepId, p.fromAttempt, p.toAttempt],
  );
  return rows[0] ? { step: mapStep(rows[0]), ended: keptStart(rows[0]) } : null;
}

/**
 * Pending steps whose needs all succeeded become ready as their next attempt; returns them for
 * enqueue. Used where the run is locked (submit, retry): a completion frees dependents through
 * stepsReleaseAfter instead.
 */
export async function stepsRelease(client: PoolClient, p: { runId: number }): Promise<StepRow[]> {
  const { rows } = await client.query(
    `UPDATE steps d SET status = 'ready', attempt = d.attempt + 1, cause = NULL, finished_at = NULL, unmet_needs = 0
      WHERE d.run_id = $1 AND d.status = 'pending'
        AND NOT EXISTS (SELECT 1 FROM steps n WHERE n.run_id = $1 AND n.name = ANY(d.needs) AND n.status <> 'succeeded')
     RETURNING d.*`,
    [p.runId],
  );
  return rows.map(mapStep).sort((a, b) => a.id - b.id);
}

const STEPS_RELEASE_AFTER = prepared(
  `WITH f AS (SELECT * FROM unnest($1::bigint[], $2::text[]) AS f(run_id, name)),
          -- Each run's dependents through the (run_id, name) index, run by run: a join over the
          -- whole list let the plan hash it against every pending step of the estate instead.
          -- OFFSET 0 keeps the per-run subquery from being pulled up into that join.
          m AS (SELECT d.id, count(*)::int AS n
                  FROM f CROSS JOIN LATERAL (SELECT d.id FROM steps d WHERE d.run_id = f.run_id AND d.status = 'pending' AND f.name = ANY(d.needs) OFFSET 0) d
                 GROUP BY d.id),
          -- The update reads its counts from l alone (see closeRunsCtes: no m-by-l rescans).
          l AS (SELECT s.id, s.run_id, m.n FROM steps s JOIN m USING (id) ORDER BY s.id FOR NO KEY UPDATE OF s)
     UPDATE steps d
        SET unmet_needs = greatest(d.unmet_needs - l.n, 0),
            status = CASE WHEN d.unmet_needs - l.n <= 0 THEN 'ready' ELSE d.status END,
            attempt = CASE WHEN d.unmet_needs - l.n <= 0 THEN d.attempt + 1 ELSE d.attempt END,
            cause = CASE WHEN d.unmet_needs - l.n <= 0 THEN NULL ELSE d.cause END,
            finished_at = CASE WHEN d.unmet_needs - l.n <= 0 THEN NULL ELSE d.finished_at END
       -- The run's classification columns come back with its freed steps: the enqueue that
       -- follows needs them, and reading them here spares the completion a round trip.
       FROM l JOIN runs r ON r.id = l.run_id
      WHERE d.id = l.id AND d.status = 'pending'
     RETURNING d.id, d.run_id, d.status, d.attempt, d.priority, d.placement, d.pools, d.load,
               r.project AS run_project, r.priority AS run_priority, r.scope AS run_scope, r.max_parallel_steps AS run_max_parallel_steps,
               r.placement AS run_placement, r.target AS run_target`,
);

/** What an enqueue reads of a step that became ready. */
export type ReadyStep = Pick<StepRow, 'id' | 'runId' | 'attempt' | 'priority' | 'placement' | 'pools' | 'load'>;

/** Steps a group of completions made ready, with their runs as classify reads them. */
export interface FreedSteps { steps: ReadyStep[]; runs: RunToClassify[] }

/**
 * These steps just succeeded: each pending dependent's count of unmet needs goes down by how many
 * of them it needs, and those reaching zero become ready as their next attempt (returned, for
 * enqueue, with their runs). One statement for any number of runs, without the run row lock:
 * dependents are locked in id order, so two batches freeing the same step serialise on it and
 * exactly one sees zero.
 */
export async function stepsReleaseAfter(client: PoolClient, succeeded: Array<{ runId: number; name: string }>): Promise<FreedSteps> {
  if (succeeded.length === 0) return { steps: [], runs: [] };
  const { rows } = await client.query(STEPS_RELEASE_AFTER([succeeded.map((s) => s.runId), succeeded.map((s) => s.name)]));
  const ready = rows.filter((r) => r.status === 'ready');
  const runs = new Map<number, RunToClassify>();
  for (const r of ready) {
    const id = Number(r.run_id);
    if (!runs.has(id)) runs.set(id, { id, project: r.run_project, priority: r.run_priority, scope: r.run_scope, maxParallelSteps: r.run_max_parallel_steps, placement: r.run_placement, target: r.run_target });
  }
  return {
    steps: ready.map((r) => ({ id: Number(r.id), runId: Number(r.run_id), attempt: r.attempt, priority: r.priority, placement: r.placement, pools: r.pools ?? [], load: Number(r.load) })).sort((a, b) => a.id - b.id),
    runs: [...runs.values()],
  };
}

const RUNS_CLOSE_STEPS = prepared(
  `WITH m AS (SELECT * FROM unnest($1::bigint[], $2::int[]) AS m(id, n)),
        ${closeRunsCtes('m')}
   SELECT id, status, open_steps FROM c`,
);

/**
 * n steps of each run left pending/ready/running: the runs' open counts go down, rows locked in id
 * order (one global order, so concurrent batches never deadlock on runs). Returns every run with
 * its count after; a running run at zero is the caller's to finish. The row lock is held from here
 * to the commit only.
 */
export async function runsCloseSteps(client: PoolClient, closed: Map<number, number>): Promise<ClosedRun[]> {
  if (closed.size === 0) return [];
  const { rows } = await client.query(RUNS_CLOSE_STEPS([[...closed.keys()], [...closed.values()]]));
  return closedRuns(rows);
}

/**
 * Locks every step of the run in id order. A retry takes these before the run row: a completion
 * in flight holds its step until it commits, so the retry counts what that completion freed.
 */
export async function stepsLockRun(client: PoolClient, runId: number): Promise<void> {
  await client.query(`SELECT id FROM steps WHERE run_id = $1 ORDER BY id FOR NO KEY UPDATE`, [runId]);
}

/** Recounts the run's open steps (under its row lock: cancel, retry, a lost pin). */
export async function runOpenRecount(client: PoolClient, runId: number): Promise<number> {
  const { rows } = await client.query(
    `UPDATE runs SET open_steps = (SELECT count(*) FROM steps WHERE run_id = $1 AND status IN ('pending', 'ready', 'running'))
      WHERE id = $1 RETURNING open_steps`,
    [runId],
  );
  return rows[0]?.open_steps ?? 0;
}

/** Every pending step downstream of `stepName`, transitively, becomes skipped with `cause`. */
export async function stepsSkipDependents(client: PoolClient, p: { runId: number; stepName: string; cause: string }): Promise<string[]> {
  const { rows } = await client.query(
    `WITH RECURSIVE down(name) AS (
       SELECT s.name FROM steps s WHERE s.run_id = $1 AND $2 = ANY(s.needs) AND s.status = 'pending'
       UNION
       SELECT s.name FROM steps s JOIN down ON down.name = ANY(s.needs) WHERE s.run_id = $1 AND s.status = 'pending'
     )
     UPDATE steps SET status = 'skipped', cause = $3, finished_at = now()
      WHERE run_id = $1 AND name IN (SELECT name FROM down)
     RETURNING name`,
    [p.runId, p.stepName, p.cause],
  );
  return rows.map((r) => r.name);
}

/** Steps of the run still pending or ready become `status` (skipped or cancelled); returns their ids. */
export async function stepsCloseWaiting(client: PoolClient, p: { runId: number; status: 'skipped' | 'cancelled'; cause: string; includeRunning?: boolean }): Promise<Array<{ id: number; name: string; attempt: number; wasRunning: boolean }>> {
  const { rows } = await client.query(
    `UPDATE steps s SET status = $2, cause = $3, finished_at = now()
       FROM steps old
      WHERE s.id = old.id AND s.run_id = $1
        AND s.status = ANY(CASE WHEN $4 THEN ARRAY['pending', 'ready', 'running'] ELSE ARRAY['pending', 'ready'] END)
     RETURNING s.id, s.name, s.attempt, old.status = 'running' AS was_running`,
    [p.runId, p.status, p.cause, p.includeRunning ?? false],
  );
  return rows.map((r) => ({ id: Number(r.id), name: r.name, attempt: r.attempt, wasRunning: r.was_running })).sort((a, b) => a.id - b.id);
}

const RUNS_FINISH = prepared(
  // Each run's steps are read through the (run_id, name) index, one run at a time (LATERAL): a
  // join over the whole set would have the planner scan every step of every run instead.
  `WITH ids AS (SELECT DISTINCT unnest($1::bigint[]) AS id),
          verdict AS (
            SELECT ids.id, t.open,
                   CASE WHEN e.name IS NOT NULL THEN 'error' WHEN f.name IS NOT NULL THEN 'failed'
                        WHEN t.cancelled > 0 THEN 'cancelled' ELSE 'succeeded' END AS status,
                   -- The runner's own cause usually names the exit code already: say it once.
                   CASE WHEN e.name IS NOT NULL THEN 'step ' || e.name || ': ' || coalesce(e.cause, 'system error')
                        WHEN f.name IS NOT NULL THEN 'step ' || f.name || ' failed' ||
                             CASE WHEN coalesce(f.cause, '') <> '' THEN ': ' || f.cause
                                  WHEN f.exit_code IS NOT NULL THEN ' with exit code ' || f.exit_code ELSE '' END END AS cause
              FROM ids
             CROSS JOIN LATERAL (
                    SELECT count(*) FILTER (WHERE s.status IN ('pending', 'ready', 'running')) AS open,
                           count(*) FILTER (WHERE s.status = 'cancelled') AS cancelled,
                           count(*) FILTER (WHERE s.status = 'system_error') AS errors,
                           count(*) FILTER (WHERE s.status = 'failed') AS failures
                      FROM steps s WHERE s.run_id = ids.id) t
              LEFT JOIN LATERAL (
                    SELECT s.name, s.cause FROM steps s
                     WHERE t.errors > 0 AND s.run_id = ids.id AND s.status = 'system_error' ORDER BY s.finished_at, s.id LIMIT 1) e ON true
              LEFT JOIN LATERAL (
                    SELECT s.name, s.cause, s.exit_code FROM steps s
                     WHERE t.errors = 0 AND t.failures > 0 AND s.run_id = ids.id AND s.status = 'failed' ORDER BY s.finished_at, s.id LIMIT 1) f ON true
             WHERE t.open = 0 OR $2::text IS NOT NULL),
          done AS (
            UPDATE runs r SET status = coalesce($2, v.status), cause = coalesce(r.cause, $3, v.cause), finished_at = now(), open_steps = v.open
              FROM verdict v
             -- Each run is reached by its id. A plain status = 'running' lets the generic plan,
             -- wherever the statistics show few running runs, scan every running run through the
             -- status index and match them against the list: no index serves the IS TRUE form.
             WHERE r.id = v.id AND (r.status = 'running') IS TRUE
            RETURNING r.id, r.status, r.template_name),
          unpinned AS (DELETE FROM run_pins p USING done WHERE p.run_id = done.id)
     SELECT id, status, CASE WHEN template_name IS NOT NULL THEN pg_notify('opschain_triggers', 'run:' || template_name) END AS notified
       FROM done`,
);

/**
 * Ends every listed run that is still running and has nothing pending, ready or running, in one
 * statement; the caller holds their row locks, so the steps it counts are those every earlier
 * transaction on these runs committed. The status: error if a step ended in system_error (cause:
 * the first by finish time), else failed if one failed (cause: the first failure), else cancelled
 * if one was cancelled, else succeeded. `override` (a cancel) imposes its status and cause and
 * ends the run whatever its steps.
 * A cause already recorded is kept. The runs' pins go with them, and a run started from a template
 * wakes the launch loop: launches waiting on its cap go at once. Returns the runs it ended.
 */
export async function runsFinish(
  client: PoolClient,
  p: { runIds: number[]; override?: { status: Exclude<RunStatus, 'running'>; cause: string | null } },
): Promise<Array<{ id: number; status: RunStatus }>> {
  if (p.runIds.length === 0) return [];
  const { rows } = await client.query(RUNS_FINISH([p.runIds, p.override?.status ?? null, p.override?.cause ?? null]));
  return rows.map((r) => ({ id: Number(r.id), status: r.status as RunStatus })).sort((a, b) => a.id - b.id);
}

/** Records the run's cause while it still runs (the first one wins). */
export async function runCauseSet(client: PoolClient, p: { runId: number; cause: string }): Promise<void> {
  await client.query(`UPDATE runs SET cause = coalesce(cause, $2) WHERE id = $1`, [p.runId, p.cause]);
}

/**
 * Back to running for a retry: no finish time, no cause. A run that had finished begins the next
 * round of its trace (its finished round's span was emitted); one still running stays in its round.
 */
export async function runReopen(client: PoolClient, runId: number): Promise<void> {
  await client.query(
    `UPDATE runs SET status = 'running', cause = NULL, finished_at = NULL,
            trace_round = trace_round + CASE WHEN status <> 'running' THEN 1 ELSE 0 END,
            trace_round_at = CASE WHEN status <> 'running' THEN now() ELSE trace_round_at END,
            open_steps = (SELECT count(*) FROM steps WHERE run_id = $1 AND status IN ('pending', 'ready', 'running'))
      WHERE id = $1`,
    [runId],
  );
}

/**
 * Every failed or system_error step becomes ready as its next attempt (fresh, unsealed log), and
 * every skipped or cancelled step goes back to pending, to follow once what it needs succeeds (a
 * step is only skipped below a failure or a lost pin, and cancelled steps were interrupted, not
 * judged: leaving either behind would strand the steps that need them). Nothing changes when the
 * run has no such step.
 */
export async function stepsRetry(client: PoolClient, runId: number): Promise<{ retried: StepRow[]; reopened: StepRow[]; ended: AttemptStart[] }> {
  const { rows: any } = await client.query(
    `SELECT 1 FROM steps WHERE run_id = $1 AND status IN ('failed', 'system_error', 'cancelled') LIMIT 1`,
    [runId],
  );
  if (any.length === 0) return { retried: [], reopened: [], ended: [] };
  // The run's steps are locked (stepsLockRun): `old` is the row as it was before this statement.
  const { rows } = await client.query(
    `UPDATE steps s SET status = 'ready', attempt = s.attempt + 1, runner_id = NULL, exit_code = NULL, cause = NULL,
            started_at = NULL, finished_at = NULL, log_sealed = false, start_log_id = NULL
       FROM steps old
      WHERE s.id = old.id AND s.run_id = $1 AND s.status IN ('failed', 'system_error')
     RETURNING s.*, old.attempt AS old_attempt, old.runner_id AS old_runner_id, old.started_at AS old_started_at, old.start_log_id AS old_start_log_id`,
    [runId],
  );
  const { rows: reopened } = await client.query(
    `UPDATE steps s SET status = 'pending', runner_id = NULL, exit_code = NULL, cause = NULL, started_at = NULL, finished_at = NULL, log_sealed = false,
            start_log_id = NULL,
            unmet_needs = (SELECT count(*) FROM steps n WHERE n.run_id = $1 AND n.name = ANY(s.needs) AND n.status <> 'succeeded')
       FROM steps old
      WHERE s.id = old.id AND s.run_id = $1 AND s.status IN ('skipped', 'cancelled')
     RETURNING s.*, old.attempt AS old_attempt, old.runner_id AS old_runner_id, old.started_at AS old_started_at, old.start_log_id AS old_start_log_id`,
    [runId],
  );
  const ended = [...rows, ...reopened].map(keptStart).filter((e): e is AttemptStart => e !== null);
  return { retried: rows.map(mapStep).sort((a, b) => a.id - b.id), reopened: reopened.map(mapStep).sort((a, b) => a.id - b.id), ended };
}

/** A runner's display name, or its id when it is not registered (any more). */
export async function runnerName(db: Db, runnerId: string): Promise<string> {
  const { rows } = await db.query(`SELECT name FROM runners WHERE id = $1`, [runnerId]);
  return rows[0]?.name ?? runnerId;
}

/** A run, its steps (with runner names) and the store's clock, read in one snapshot. */
export async function runRead(db: Pool, runId: number): Promise<{ run: RunRow; steps: StepRow[]; now: Date } | null> {
  // One snapshot, so the steps agree with the run they are shown under.
  return withSnapshot(db, async (client) => {
    const run = await runGet(client, runId);
    const steps = run ? await runSteps(client, runId) : [];
    const now = await storeNow(client);
    return run ? { run, steps, now } : null;
  });
}
