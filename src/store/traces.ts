import type { AttemptFacts, FinishedRunFacts, LeaseFacts } from '../core/trace-spans.js';
import type { Db, PoolClient } from './pool.js';
import { prepared } from './prepared.js';

/**
 * The spans a replica owes the collector (table trace_unsent, only written when traces are on,
 * but for a cancel): each row the facts of one ended attempt or run round, written in the
 * transaction that ended it, deleted once the exporter reports its spans sent. Which attempts and
 * runs a transaction ended is known from the transaction itself (the orchestrator reports them,
 * so no other replica reports them too); the facts are taken in that transaction, so a retry
 * committed right after cannot change them.
 */

/** A row of spans owed: an ended attempt, or a run's finished round. */
export type UnsentSpans = { id: number; kind: 'attempt'; facts: AttemptFacts } | { id: number; kind: 'run'; facts: FinishedRunFacts };

/** What only the ending call knows of an attempt (the rest is in its step row). */
export interface AttemptEnd {
  stepId: number;
  attempt: number;
  outcome: AttemptFacts['outcome'];
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

/** Prepared: a completion's transaction sends it once per group (traces on), so it is parsed and planned once per connection. */
const TRACE_UNSENT_MARK = prepared(
  `WITH m AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS m("stepId" bigint, attempt int, ends jsonb)),
          a AS (INSERT INTO trace_unsent (run_id, kind, facts, claimable_at)
                SELECT r.id, 'attempt', ${ATTEMPT_JSON} || m.ends, ${claimableAt('$3')}
                  FROM m JOIN steps s ON s.id = m."stepId" AND s.attempt = m.attempt AND s.finished_at IS NOT NULL
                  JOIN runs r ON r.id = s.run_id
                  LEFT JOIN runners rn ON rn.id = s.runner_id
                RETURNING id, kind, facts),
          f AS (INSERT INTO trace_unsent (run_id, kind, facts, claimable_at)
                SELECT r.id, 'run', ${RUN_JSON}, ${claimableAt('$3')}
                  FROM runs r ${RUN_LAUNCH_JOIN}
                 WHERE r.id = ANY($2::bigint[]) AND r.status <> 'running' AND r.finished_at IS NOT NULL
                RETURNING id, kind, facts)
     SELECT * FROM a UNION ALL SELECT * FROM f`,
);

/**
 * Records, in the transaction that ended them, the spans owed for these attempts and the runs that
 * ended with them: one statement. The writer sends them after its commit; any replica may claim
 * them once `resendAfterMs` has passed without the exporter reporting them sent. Returns the rows.
 */
export async function traceUnsentMark(client: PoolClient, p: { attempts: AttemptEnd[]; runIds: number[]; resendAfterMs: number }): Promise<UnsentSpans[]> {
  if (p.attempts.length === 0 && p.runIds.length === 0) return [];
  const { rows } = await client.query(
    TRACE_UNSENT_MARK([JSON.stringify(p.attempts.map((a) => ({ stepId: a.stepId, attempt: a.attempt, ends: { outcome: a.outcome, event: a.event, lease: a.lease } }))), p.runIds, p.resendAfterMs]),
  );
  return rows.map(mapUnsent);
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
     RETURNING id, kind, facts`,
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
     RETURNING id, kind, facts`,
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

const date = (v: string | null | undefined): Date | null => (v == null ? null : new Date(v));

function mapLease(l: any): LeaseFacts | null {
  if (!l) return null;
  return { ...l, readyAt: date(l.readyAt), claimedAt: date(l.claimedAt)!, deliveredAt: date(l.deliveredAt), ackedAt: date(l.ackedAt), renewedAt: date(l.renewedAt) };
}

function mapUnsent(r: any): UnsentSpans {
  const f = r.facts;
  const id = Number(r.id);
  if (r.kind === 'run') {
    const launch = f.launch ? { ...f.launch, dueAt: date(f.launch.dueAt)!, firedAt: date(f.launch.firedAt)! } : null;
    return { id, kind: 'run', facts: { ...f, createdAt: date(f.createdAt)!, roundAt: date(f.roundAt), finishedAt: date(f.finishedAt)!, launch } };
  }
  return { id, kind: 'attempt', facts: { ...f, logBytes: f.logBytes == null ? null : Number(f.logBytes), startedAt: date(f.startedAt), finishedAt: date(f.finishedAt)!, lease: mapLease(f.lease) } };
}
