import type { AttemptFacts, FinishedRunFacts, LeaseFacts } from '../core/trace-spans.js';
import type { Db, PoolClient } from './pool.js';
import { prepared } from './prepared.js';

/**
 * The spans a replica owes the collector (table trace_unsent, only written when traces are on,
 * but for a cancel): each row the facts of the attempts and run rounds one transaction ended,
 * written in that transaction, deleted once the exporter reports its spans sent. Which attempts and
 * runs a transaction ended is known from the transaction itself (the orchestrator reports them,
 * so no other replica reports them too); the facts are taken in that transaction, so a retry
 * committed right after cannot change them.
 */

/**
 * A row of spans owed: the attempts and run rounds one transaction ended. The attempts of a
 * completion's row are recorded as what only the ending call knew (`ends`, with the row's time as
 * their end) and are resolved against the store when their spans are built (traceAttemptsResolve);
 * a cancel's or a requeue's are recorded whole (`attempts`).
 */
export interface UnsentSpans {
  id: number;
  attempts: AttemptFacts[];
  ends: AttemptEnd[];
  /** When the transaction that wrote the row ended its attempts. */
  endedAt: Date;
  runs: FinishedRunFacts[];
}

/** What the ending call knows of an attempt; its step, run and runner rows hold the rest. */
export interface AttemptEnd {
  stepId: number;
  attempt: number;
  outcome: AttemptFacts['outcome'];
  exitCode: number | null;
  cause: string | null;
  runnerId: string | null;
  event: string | null;
  lease: LeaseFacts | null;
}

const RUN_TRACE_JSON = `jsonb_build_object('id', r.id, 'name', r.name, 'project', r.project, 'traceId', r.trace_id, 'parentSpanId', r.trace_parent_span,
                        'parentFlags', r.trace_flags, 'round', r.trace_round)`;

/** AttemptFacts of step s (runner rn) of run r, but for what the ending call adds (outcome, event, lease). */
const ATTEMPT_JSON = `jsonb_build_object('run', ${RUN_TRACE_JSON}, 'stepId', s.id, 'step', s.name, 'attempt', s.attempt, 'exitCode', s.exit_code,
                        'cause', s.cause, 'runnerId', s.runner_id, 'runnerName', rn.name, 'runnerGroup', rn.group_name, 'logBytes', s.log_bytes,
                        'startedAt', s.started_at, 'finishedAt', s.finished_at)`;

/** FinishedRunFacts of run r, with its launch (tick t, delivery d) when a trigger started it. */
const RUN_JSON = `jsonb_build_object('id', r.id, 'name', r.name, 'project', r.project, 'traceId', r.trace_id, 'parentSpanId', r.trace_parent_span,
                    'parentFlags', r.trace_flags, 'round', r.trace_round, 'status', r.status, 'cause', r.cause, 'createdAt', r.created_at,
                    'roundAt', r.trace_round_at, 'finishedAt', r.finished_at, 'triggerId', r.trigger_id, 'templateName', r.template_name,
                    'launch', CASE WHEN t.id IS NULL THEN NULL
                                   ELSE jsonb_build_object('tickId', t.id, 'kind', t.kind, 'triggerId', r.trigger_id, 'dueAt', coalesce(d.received_at, t.due_at),
                                                           'firedAt', coalesce(t.fired_at, r.created_at), 'deliveryId', t.delivery_id, 'deliveryKey', d.delivery_key) END)`;

/** The launch that created a triggered run, found through the ledger's (trigger_id, id) index. */
const RUN_LAUNCH_JOIN = `LEFT JOIN LATERAL (SELECT t.id, t.kind, t.due_at, t.fired_at, t.delivery_id FROM trigger_ticks t
                           WHERE r.trigger_id IS NOT NULL AND t.trigger_id = r.trigger_id AND t.run_id = r.id AND t.outcome = 'fired' LIMIT 1) t ON true
       LEFT JOIN webhook_deliveries d ON d.id = t.delivery_id`;

const claimableAt = (afterMs: string) => `now() + ${afterMs} * interval '1 millisecond'`;

/**
 * Attempt ends per row: about 300 bytes each, so a row stays under the table's toast_tuple_target
 * (0010) and is written inline as it is, neither compressed nor moved out of line, which cost
 * a large group's transaction 4 ms.
 */
const ENDS_PER_ROW = 20;

/**
 * Prepared: a completion's transaction sends it once per group (traces on), so it is parsed and
 * planned once per connection. It joins nothing for the attempts (their ends are the parameter as
 * given, in chunks of ENDS_PER_ROW) and reads only the runs that ended, which go with the first
 * chunk, so the group's transaction, which every runner call of the group waits for, grows by one insert.
 */
const TRACE_UNSENT_MARK = prepared(
  `WITH f AS (SELECT coalesce(jsonb_agg(${RUN_JSON}), '[]'::jsonb) AS list
                FROM runs r ${RUN_LAUNCH_JOIN}
               WHERE r.id = ANY($2::bigint[]) AND r.status <> 'running' AND r.finished_at IS NOT NULL)
   INSERT INTO trace_unsent (kind, facts, claimable_at)
   SELECT 'ended', jsonb_build_object('ends', c.ends, 'runs', CASE WHEN c.i = 1 THEN f.list ELSE '[]'::jsonb END), ${claimableAt('$3')}
     FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS c(ends, i), f
    WHERE c.ends <> '[]'::jsonb OR (c.i = 1 AND f.list <> '[]'::jsonb)
   RETURNING id, marked_at, facts->'runs' AS runs, (facts->'ends'->0->>'stepId')::bigint AS first_step`,
);

/** Lease times as epoch milliseconds: Date's own JSON (an ISO string) cost a completion group more than the rest of its record. */
function endTimesAsMs(this: unknown, key: string, value: unknown): unknown {
  const v = (this as Record<string, unknown>)[key];
  return v instanceof Date ? v.getTime() : value;
}

/**
 * Records, in the transaction that ended them, the spans owed for these attempts and the runs that
 * ended with them: one statement, a row per ENDS_PER_ROW attempts. The writer sends them after its
 * commit; any replica may claim a row once `resendAfterMs` has passed without the exporter
 * reporting it sent. Returns the rows.
 */
export async function traceUnsentMark(client: PoolClient, p: { attempts: AttemptEnd[]; runIds: number[]; resendAfterMs: number }): Promise<UnsentSpans[]> {
  if (p.attempts.length === 0 && p.runIds.length === 0) return [];
  const chunks: AttemptEnd[][] = [];
  for (let i = 0; i < p.attempts.length; i += ENDS_PER_ROW) chunks.push(p.attempts.slice(i, i + ENDS_PER_ROW));
  if (chunks.length === 0) chunks.push([]);
  const { rows } = await client.query(TRACE_UNSENT_MARK([JSON.stringify(chunks, endTimesAsMs), p.runIds, p.resendAfterMs]));
  const chunkOf = new Map<number | null, AttemptEnd[]>(chunks.map((c) => [c[0]?.stepId ?? null, c]));
  return rows.map((r) => ({
    id: Number(r.id),
    attempts: [],
    ends: chunkOf.get(r.first_step == null ? null : Number(r.first_step)) ?? [],
    endedAt: r.marked_at,
    runs: (r.runs as any[]).map(mapRun),
  }));
}

/**
 * What the store holds of the steps, runs and runners of attempts recorded as their ends. Read
 * after the ending transaction committed (or when another replica resends the row): the step's
 * name, run and trace do not change; its start and log size are the attempt's while the step is
 * still at that attempt (a retry since moves it on, and they are left out).
 */
const TRACE_ATTEMPTS_RESOLVE = prepared(
  `SELECT s.id, s.attempt, s.name, s.started_at, s.log_bytes, s.runner_id,
          r.id AS run_id, r.name AS run_name, r.project, r.trace_id, r.trace_parent_span, r.trace_flags, r.trace_round, rn.name AS runner_name, rn.group_name
     FROM steps s JOIN runs r ON r.id = s.run_id
     LEFT JOIN runners rn ON rn.id = coalesce($2::jsonb->>(s.id::text), s.runner_id)
    WHERE s.id = ANY($1::bigint[])`,
);

/** The rows' attempts, whole: those recorded as ends resolved against the store in one read. */
export async function traceAttemptsResolve(db: Db, rows: UnsentSpans[]): Promise<Array<{ id: number; attempts: AttemptFacts[]; runs: FinishedRunFacts[] }>> {
  const ends = rows.flatMap((r) => r.ends);
  const byStep = new Map<number, any>();
  if (ends.length > 0) {
    const runnerOf: Record<string, string> = {};
    for (const e of ends) if (e.runnerId) runnerOf[e.stepId] = e.runnerId;
    const { rows: found } = await db.query(TRACE_ATTEMPTS_RESOLVE([[...new Set(ends.map((e) => e.stepId))], JSON.stringify(runnerOf)]));
    for (const f of found) byStep.set(Number(f.id), f);
  }
  return rows.map((row) => ({
    id: row.id,
    runs: row.runs,
    attempts: [
      ...row.attempts,
      ...row.ends.flatMap((e): AttemptFacts[] => {
        const s = byStep.get(e.stepId);
        if (!s) return [];
        const same = s.attempt === e.attempt;
        return [
          {
            run: { id: Number(s.run_id), name: s.run_name, project: s.project, traceId: s.trace_id, parentSpanId: s.trace_parent_span, parentFlags: s.trace_flags, round: s.trace_round },
            stepId: e.stepId,
            step: s.name,
            attempt: e.attempt,
            outcome: e.outcome,
            exitCode: e.exitCode,
            cause: e.cause,
            event: e.event,
            runnerId: e.runnerId ?? (same ? s.runner_id : null),
            runnerName: s.runner_name ?? null,
            runnerGroup: s.group_name ?? null,
            logBytes: same && s.log_bytes != null ? Number(s.log_bytes) : null,
            startedAt: same ? s.started_at : null,
            finishedAt: row.endedAt,
            lease: e.lease,
          },
        ];
      }),
    ],
  }));
}

/**
 * An attempt that went back to the queue as a new attempt (released, never acked, reclaimed): the
 * spans owed for it, with the step's name and its run's trace as they are now and this moment as
 * its end. Returns the row, or nothing when the step is not ready as `nextAttempt`.
 */
export async function traceUnsentMarkRequeued(
  client: PoolClient,
  p: { stepId: number; nextAttempt: number; end: Omit<AttemptFacts, 'run' | 'stepId' | 'step' | 'finishedAt'>; resendAfterMs: number },
): Promise<UnsentSpans | undefined> {
  const { rows } = await client.query(
    `INSERT INTO trace_unsent (run_id, kind, facts, claimable_at)
     SELECT r.id, 'attempt', jsonb_build_object('run', ${RUN_TRACE_JSON}, 'stepId', s.id, 'step', s.name, 'finishedAt', now()) || $3::jsonb, ${claimableAt('$4')}
       FROM steps s JOIN runs r ON r.id = s.run_id
      WHERE s.id = $1 AND s.attempt = $2 AND s.status = 'ready'
     RETURNING id, kind, facts, marked_at`,
    [p.stepId, p.nextAttempt, JSON.stringify(p.end), p.resendAfterMs],
  );
  return rows[0] ? mapUnsent(rows[0]) : undefined;
}

/**
 * Records, in the cancel's transaction, the spans owed for a cancelled run: its round and each
 * attempt the cancel stopped while it ran (started in the run's current round; the lease was
 * revoked with the cancel, so the spans have the step's times). Claimable at once: whoever
 * cancels may export nothing (a CLI on the store).
 */
export async function traceUnsentMarkCancelled(client: PoolClient, runId: number): Promise<void> {
  await client.query(
    `WITH a AS (INSERT INTO trace_unsent (run_id, kind, facts)
                SELECT r.id, 'attempt', ${ATTEMPT_JSON} || '{"outcome": "cancelled", "event": null, "lease": null}'::jsonb
                  FROM runs r JOIN steps s ON s.run_id = r.id
                  LEFT JOIN runners rn ON rn.id = s.runner_id
                 WHERE r.id = $1 AND s.status = 'cancelled' AND s.finished_at IS NOT NULL AND s.started_at >= coalesce(r.trace_round_at, r.created_at))
     INSERT INTO trace_unsent (run_id, kind, facts)
     SELECT r.id, 'run', ${RUN_JSON} FROM runs r ${RUN_LAUNCH_JOIN}
      WHERE r.id = $1 AND r.status <> 'running' AND r.finished_at IS NOT NULL`,
    [runId],
  );
}

/**
 * Claims up to `limit` rows whose time has come (their writer's grace passed without a send, or a
 * cancel's): each by one replica (SKIP LOCKED), and made claimable again only `resendAfterMs` later,
 * so a claimer that dies before its send leaves them to the next. `now` is the store's clock unless given.
 */
export async function traceUnsentClaim(db: Db, p: { limit: number; resendAfterMs: number; now?: Date }): Promise<UnsentSpans[]> {
  const { rows } = await db.query(
    `UPDATE trace_unsent SET claimable_at = coalesce($3::timestamptz, now()) + $2 * interval '1 millisecond'
      WHERE id IN (SELECT id FROM trace_unsent WHERE claimable_at <= coalesce($3::timestamptz, now()) ORDER BY claimable_at, id LIMIT $1 FOR UPDATE SKIP LOCKED)
     RETURNING id, kind, facts, marked_at`,
    [p.limit, p.resendAfterMs, p.now ?? null],
  );
  return rows.map(mapUnsent).sort((x, y) => x.id - y.id);
}

/** Forgets rows whose spans the exporter sent (or that the sampler dropped). */
const TRACE_UNSENT_CLEAR = prepared(`DELETE FROM trace_unsent WHERE id = ANY($1::bigint[])`);

export async function traceUnsentClear(db: Db, ids: number[]): Promise<void> {
  if (ids.length === 0) return;
  await db.query(TRACE_UNSENT_CLEAR([ids]));
}

/** A time as the store's JSON holds it: an ISO string (built in SQL) or epoch milliseconds (an end's lease, built here). */
const date = (v: string | number | null | undefined): Date | null => (v == null ? null : new Date(v));

function mapLease(l: any): LeaseFacts | null {
  if (!l) return null;
  return { ...l, readyAt: date(l.readyAt), claimedAt: date(l.claimedAt)!, deliveredAt: date(l.deliveredAt), ackedAt: date(l.ackedAt), renewedAt: date(l.renewedAt) };
}

const mapAttempt = (f: any): AttemptFacts => ({ ...f, logBytes: f.logBytes == null ? null : Number(f.logBytes), startedAt: date(f.startedAt), finishedAt: date(f.finishedAt)!, lease: mapLease(f.lease) });

function mapRun(f: any): FinishedRunFacts {
  const launch = f.launch ? { ...f.launch, dueAt: date(f.launch.dueAt)!, firedAt: date(f.launch.firedAt)! } : null;
  return { ...f, createdAt: date(f.createdAt)!, roundAt: date(f.roundAt), finishedAt: date(f.finishedAt)!, launch };
}

function mapEnd(e: any): AttemptEnd {
  return { stepId: Number(e.stepId), attempt: e.attempt, outcome: e.outcome, exitCode: e.exitCode ?? null, cause: e.cause ?? null, runnerId: e.runnerId ?? null, event: e.event ?? null, lease: mapLease(e.lease) };
}

function mapUnsent(r: any): UnsentSpans {
  const f = r.facts;
  const base = { id: Number(r.id), endedAt: r.marked_at as Date };
  if (r.kind === 'ended') return { ...base, attempts: [], ends: f.ends.map(mapEnd), runs: f.runs.map(mapRun) };
  if (r.kind === 'run') return { ...base, attempts: [], ends: [], runs: [mapRun(f)] };
  return { ...base, attempts: [mapAttempt(f)], ends: [], runs: [] };
}
