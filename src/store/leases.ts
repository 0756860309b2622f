import type { PoolClient, Db } from './pool.js';
import { prepared } from './prepared.js';
import { ENTRY_COLS, entryCols, entryColsBack, poolFreedNotify } from './queue.js';

/**
 * CTE `done`: the attempts of ended leases d recorded done, with `token` as their token. An attempt
 * ends once (its lease row, one per step, is deleted by one transaction), so a plain insert guarded
 * by NOT EXISTS, not ON CONFLICT, whose speculative insertion logs a confirmation record per row
 * (48 B of WAL per step).
 */
const doneCte = (token: string) => `done AS (INSERT INTO completed_attempts (step_id, attempt, token, runner_id)
                   SELECT step_id, attempt, ${token}, runner_id FROM d
                    WHERE NOT EXISTS (SELECT 1 FROM completed_attempts x WHERE x.step_id = d.step_id AND x.attempt = d.attempt))`;

/**
 * CTEs `holds`: the pool holds of ended leases d dropped (a step in no pool skips the probe), and
 * `freed`: each pool they held announced (poolFreedNotify). `freed` runs only when read: the
 * statement's outer query joins FREED.
 */
const HOLDS_CTE = `holds AS (DELETE FROM pool_holds h USING d WHERE cardinality(d.pools) > 0 AND h.step_id = d.step_id RETURNING h.pool),
          freed AS (SELECT ${poolFreedNotify('p.pool')} FROM (SELECT DISTINCT pool FROM holds) p)`;
const FREED = `CROSS JOIN (SELECT count(*) FROM freed) announced`;

/** The offer columns of steps s joined with runs r, prefixed so they sit beside a lease row. */
const DETAIL_COLS = `s.id AS detail_step_id, s.run_id AS detail_run_id, s.name AS detail_step, s.command AS detail_command,
       r.env || s.env AS detail_env, s.timeout_ms AS detail_timeout_ms, r.max_parallel_steps AS detail_max_parallel_steps,
       r.trigger_payload AS detail_webhook_payload, r.trace_id AS detail_trace_id, r.trace_parent_span AS detail_trace_parent_span,
       r.trace_flags AS detail_trace_flags`;

/** The lease columns mapLease reads: statements return these, not `*` (no unread dates to parse). */
const LEASE_COLS = ['step_id', 'run_id', 'attempt', 'token', 'holder', 'runner_id', 'load', 'pools', 'run_scope', 'max_parallel',
  'claimed_at', 'delivered_at', 'acked_at', 'renewed_at', 'expires_at', 'executing', 'ready_at', 'lane', 'renewals', 'waited'];
export const leaseCols = (alias: string) => LEASE_COLS.map((c) => `${alias}.${c}`).join(', ');

export interface LeaseRef { stepId: number; token: string }

export interface LeaseRow {
  stepId: number;
  runId: number;
  attempt: number;
  token: string;
  holder: string;
  runnerId: string | null;
  load: number;
  pools: string[];
  runScope: boolean;
  maxParallel: number;
  claimedAt: Date;
  deliveredAt: Date | null;
  ackedAt: Date | null;
  renewedAt: Date | null;
  expiresAt: Date;
  executing: boolean;
  /** When the entry became ready (its wait in the queue began; a return keeps it), and its lane; absent when not read. */
  readyAt?: Date;
  lane?: number;
  /** Renewals so far; absent when not read. */
  renewals?: number;
  /** Milliseconds the entry spent set aside, per verdict (migration 0005); absent when not read or none. */
  waited?: Record<string, number> | null;
}

export const mapLease = (r: any): LeaseRow => ({
  stepId: Number(r.step_id),
  runId: Number(r.run_id),
  attempt: r.attempt,
  token: String(r.token),
  holder: r.holder,
  runnerId: r.runner_id,
  load: Number(r.load),
  pools: r.pools ?? [],
  runScope: r.run_scope,
  maxParallel: r.max_parallel,
  claimedAt: r.claimed_at,
  deliveredAt: r.delivered_at,
  ackedAt: r.acked_at,
  renewedAt: r.renewed_at,
  expiresAt: r.expires_at,
  executing: r.executing,
  ...(r.ready_at !== undefined ? { readyAt: r.ready_at } : {}),
  ...(r.lane !== undefined ? { lane: r.lane } : {}),
  ...(r.renewals !== undefined ? { renewals: r.renewals ?? 0 } : {}),
  ...(r.waited !== undefined ? { waited: r.waited } : {}),
});

const refs = (items: LeaseRef[]) => [items.map((i) => i.stepId), items.map((i) => i.token)];

/**
 * A delivery is never acked by the server: only the runner's ack (or a renewal or completion)
 * says the offer reached it, so an answer lost on the way costs the ack deadline, not the TTL.
 */
export interface DeliverItem { stepId: number; runnerId: string; requestId: string | null }

/**
 * A write that rides on the delivery as one more part of its statement: SQL over the new leases,
 * given as a from-item aliased `m` with step_id, attempt and runner_id.
 */
export type DeliveryWrite = (leases: string) => string;

const deliverSql = (along?: DeliveryWrite) =>
  `WITH m AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[]) AS m(step_id, runner_id, request_id)),
          d AS (DELETE FROM queue_ready q WHERE q.step_id = ANY($1::bigint[]) RETURNING q.*),
          l AS (
            INSERT INTO step_leases (${ENTRY_COLS}, holder, claimed_at, delivered_at, runner_id, request_key, ack_deadline, expires_at)
            SELECT ${entryCols('d')},
                   $4, now(), now(), m.runner_id, hashtextextended(m.request_id, 0), now() + $5 * interval '1 millisecond',
                   now() + $6 * interval '1 millisecond'
              FROM d JOIN m USING (step_id)
            RETURNING *)${along ? `,
          along AS (${along('l AS m')})` : ''}
     SELECT l.step_id, l.run_id, l.attempt, l.token, l.runner_id, l.run_scope, l.max_parallel, l.delivered_at, ${DETAIL_COLS}
       FROM l LEFT JOIN steps s ON s.id = l.step_id LEFT JOIN runs r ON r.id = s.run_id`;

const LEASE_DELIVER = prepared(deliverSql());

/** A lease as its delivery returns it: what its offer and the tick read of it, no more. */
export type DeliveredLease = Pick<LeaseRow, 'stepId' | 'runId' | 'attempt' | 'token' | 'runScope' | 'maxParallel'> & { runnerId: string; deliveredAt: Date };
/** The delivery with each write that rode on it, made once per write. */
const deliverAlong = new Map<DeliveryWrite, ReturnType<typeof prepared>>();

/**
 * Moves claimed queue rows into delivered leases and returns each with what its offer carries
 * (offerDetails), in the order of `items`, in one statement, with `along` (when given) as one
 * more part of it. In the transaction that locked the rows with queueClaim, or alone after an
 * unlocked claim: its delete takes each row once, so a row another dispatcher took or a cancel
 * removed meanwhile is not leased, and it deletes in step order through the primary key (as a
 * cancel does), so two deliveries over overlapping rows wait on each other instead of
 * deadlocking. A crash before commit leaves the queue untouched.
 */
export async function leaseDeliver(
  client: PoolClient,
  p: { holder: string; ttlMs: number; ackMs: number; items: DeliverItem[]; along?: DeliveryWrite },
): Promise<Array<{ lease: DeliveredLease; detail: OfferDetail | undefined }>> {
  if (p.items.length === 0) return [];
  let statement = LEASE_DELIVER;
  if (p.along) {
    statement = deliverAlong.get(p.along) ?? prepared(deliverSql(p.along));
    deliverAlong.set(p.along, statement);
  }
  const { rows } = await client.query(statement([p.items.map((i) => i.stepId), p.items.map((i) => i.runnerId), p.items.map((i) => i.requestId), p.holder, p.ackMs, p.ttlMs]));
  const order = new Map(p.items.map((i, k) => [i.stepId, k]));
  rows.sort((a, b) => order.get(Number(a.step_id))! - order.get(Number(b.step_id))!);
  return rows.map((r) => ({
    lease: {
      stepId: Number(r.step_id), runId: Number(r.run_id), attempt: r.attempt, token: String(r.token), runnerId: r.runner_id,
      runScope: r.run_scope, maxParallel: r.max_parallel, deliveredAt: r.delivered_at,
    },
    detail: r.detail_step_id == null ? undefined : mapDetail(r),
  }));
}

/**
 * Leases handed to this runner under this acquire request id and not yet acked: a retried acquire
 * gets them again, whichever replica it reaches, from committed rows alone (after a failover too).
 * The lease keeps the id's 64-bit digest, so it is matched by digest among this runner's leases.
 */
export async function leaseByRequest(db: Db, p: { runnerId: string; requestId: string }): Promise<LeaseRow[]> {
  const { rows } = await db.query(
    `SELECT * FROM step_leases WHERE runner_id = $1 AND request_key = hashtextextended($2, 0) AND acked_at IS NULL ORDER BY position`,
    [p.runnerId, p.requestId],
  );
  return rows.map(mapLease);
}

/**
 * A lease as one runner presents it: the step, the token it was handed, and who presents it.
 * "Hold" in the code means this one thing, a lease held by its holder; a step in a pool occupies
 * a slot, a posture in force stops offers, a drained runner's poll idles, a launch that cannot go
 * yet is deferred.
 */
export interface HeldLeaseRef extends LeaseRef { runnerId: string }

/** The key an answer is matched on: step, token and runner together. */
export const heldKey = (r: { stepId: number; token: string; runnerId: string }): string => `${r.stepId}:${r.token}:${r.runnerId}`;

const heldRefs = (items: HeldLeaseRef[]) => [items.map((i) => i.stepId), items.map((i) => i.token), items.map((i) => i.runnerId)];
const heldKeys = (rows: any[]) => new Set(rows.map((r) => heldKey({ stepId: Number(r.step_id), token: String(r.token), runnerId: r.runner_id })));

/**
 * Leases `l` matching the items `m` (unnest of $1 steps, $2 tokens, $3 runners). The primary key
 * is named with the whole list as well as per item: the generic plan then reads the leases in one
 * index scan of the key, where a join on the item alone let the planner, once the table had been
 * vacuumed and analysed, probe it item by item (0.75 against 1.54 ms for 160 items), or through
 * the runner index, reading every lease of the runner for each item.
 */
const HELD_MATCH = `l.step_id = ANY($1::bigint[]) AND l.step_id = m.step_id AND l.token = m.token AND l.runner_id = m.runner_id`;

const LEASE_ACK = prepared(
  `UPDATE step_leases l SET acked_at = coalesce(l.acked_at, now()), expires_at = now() + $4 * interval '1 millisecond'
       FROM unnest($1::bigint[], $2::bigint[], $3::text[]) AS m(step_id, token, runner_id)
      WHERE ${HELD_MATCH}
      RETURNING l.step_id, l.token, l.runner_id`,
);

/**
 * Ack: the offer reached the runner. Extends the expiry (TTL counts from the last ack/renewal).
 * Each item is fenced by its own token and runner; items of many runners go in one statement.
 * Returns the heldKey of every item that matched a live lease.
 */
export async function leaseAck(db: Db, p: { ttlMs: number; items: HeldLeaseRef[] }): Promise<Set<string>> {
  if (p.items.length === 0) return new Set();
  const { rows } = await db.query(LEASE_ACK([...heldRefs(p.items), p.ttlMs]));
  return heldKeys(rows);
}

const LEASE_RENEW = prepared(
  `UPDATE step_leases l
        SET renewed_at = now(), renewals = coalesce(l.renewals, 0) + 1, executing = true, acked_at = coalesce(l.acked_at, now()),
            expires_at = now() + $4 * interval '1 millisecond'
       FROM unnest($1::bigint[], $2::bigint[], $3::text[]) AS m(step_id, token, runner_id)
      WHERE ${HELD_MATCH}
      RETURNING l.step_id, l.token, l.runner_id`,
);

/** Renew: extends the expiry and records that the runner is executing (implies the ack). Fenced per item. */
export async function leaseRenew(db: Db, p: { ttlMs: number; items: HeldLeaseRef[] }): Promise<Set<string>> {
  if (p.items.length === 0) return new Set();
  const { rows } = await db.query(LEASE_RENEW([...heldRefs(p.items), p.ttlMs]));
  return heldKeys(rows);
}

/** The live lease this token fences, or undefined (stale, revoked, or another runner's). */
export async function leaseCheck(db: Db, p: { runnerId: string; stepId: number; token: string }): Promise<LeaseRow | undefined> {
  const { rows } = await db.query(`SELECT * FROM step_leases WHERE step_id = $1 AND token = $2 AND runner_id = $3`, [p.stepId, p.token, p.runnerId]);
  return rows[0] ? mapLease(rows[0]) : undefined;
}

const leaseCompleteSql = (more: string) =>
  `WITH d AS (DELETE FROM step_leases l USING unnest($1::bigint[], $2::bigint[], $3::text[]) AS m(step_id, token, runner_id)
                 WHERE ${HELD_MATCH} RETURNING l.*),
          ${doneCte('token')},
          ${HOLDS_CTE}
     SELECT d.step_id, d.run_id, d.attempt, d.token, d.runner_id, d.run_scope, d.pools${more} FROM d ${FREED}`;

const LEASE_COMPLETE = prepared(leaseCompleteSql(''));
/** The completion that also returns the lease's times, for the attempt's spans (only when traces are on). */
const LEASE_COMPLETE_TIMED = prepared(leaseCompleteSql(', d.holder, d.lane, d.ready_at, d.claimed_at, d.delivered_at, d.acked_at, d.renewed_at, d.renewals, d.waited'));

/** The times of a lease that ended, as an attempt's spans show them. */
export type LeaseTimes = Pick<LeaseRow, 'token' | 'holder' | 'runnerId' | 'claimedAt' | 'deliveredAt' | 'ackedAt' | 'renewedAt' | 'readyAt' | 'lane' | 'renewals' | 'waited'>;

/** A lease a completion ended: what the orchestrator is told of it. */
export type CompletedLease = Pick<LeaseRow, 'stepId' | 'runId' | 'attempt' | 'token' | 'runScope'> & { runnerId: string; pools: string[]; times?: LeaseTimes };

/**
 * Ends leases whose tokens match, each presented by the runner that holds it (items of many
 * runners in one statement): deletes them, records (step, attempt, token, runner) done and drops
 * their pool holds. Returns the ended leases (only what the caller reports of them to the
 * orchestrator, in the same transaction: every column read back costs both ends).
 */
export async function leaseComplete(client: PoolClient, p: { items: HeldLeaseRef[]; times?: boolean }): Promise<CompletedLease[]> {
  if (p.items.length === 0) return [];
  const { rows } = await client.query((p.times ? LEASE_COMPLETE_TIMED : LEASE_COMPLETE)(heldRefs(p.items)));
  return rows.map((r) => ({
    stepId: Number(r.step_id), runId: Number(r.run_id), attempt: r.attempt, token: String(r.token), runnerId: r.runner_id, runScope: r.run_scope, pools: r.pools ?? [],
    ...(p.times
      ? { times: { token: String(r.token), holder: r.holder, runnerId: r.runner_id, lane: r.lane, readyAt: r.ready_at, renewals: r.renewals ?? 0, waited: r.waited, claimedAt: r.claimed_at, deliveredAt: r.delivered_at, ackedAt: r.acked_at, renewedAt: r.renewed_at } }
      : {}),
  }));
}

/**
 * Vacuums the lease table: dead leases' tuples and index entries go, and their space is reused.
 * ANALYZE: a vacuumed table with no statistics let the generic plans of the lease writes reach
 * leases through the runner index. SKIP_LOCKED: a vacuum another replica (or autovacuum) is
 * running already does the work. No truncation: giving back the table's empty tail needs an
 * exclusive lock that the steady traffic of deliveries would make it wait for, and the space is
 * reused anyway.
 */
export async function leaseTableVacuum(db: Db): Promise<void> {
  await db.query(`VACUUM (ANALYZE, SKIP_LOCKED, TRUNCATE false) step_leases`);
}

const DONE_BY_TOKEN = prepared(
  `SELECT d.step_id, d.token, d.runner_id FROM completed_attempts d JOIN unnest($1::bigint[], $2::bigint[], $3::text[]) AS m(step_id, token, runner_id)
       ON d.step_id = m.step_id AND d.token = m.token AND d.runner_id = m.runner_id`,
);

/**
 * Which of these items were already completed with that very token by that very runner (a
 * repeated completion): their heldKeys. Another runner presenting the token is not a repeat.
 */
export async function doneByToken(db: Db, items: HeldLeaseRef[]): Promise<Set<string>> {
  if (items.length === 0) return new Set();
  const { rows } = await db.query(DONE_BY_TOKEN(heldRefs(items)));
  return heldKeys(rows);
}

/**
 * Puts leases back on the queue at their original position: at the same attempt when nothing
 * external saw them (a cancelled acquire, an unexposed claim), or as the next attempt when a
 * runner may have (release, an offer never acked). Pool holds are dropped. Selection is by
 * (step, token) refs, optionally restricted to one runner.
 */
export async function leaseReturn(client: PoolClient, p: { items: LeaseRef[]; runnerId?: string; newAttempt: boolean }): Promise<LeaseRow[]> {
  if (p.items.length === 0) return [];
  const { rows } = await client.query(
    `WITH d AS (DELETE FROM step_leases l USING unnest($1::bigint[], $2::bigint[]) AS m(step_id, token)
                 WHERE l.step_id = m.step_id AND l.token = m.token AND ($3::text IS NULL OR l.runner_id = $3) RETURNING l.*),
          ${HOLDS_CTE},
          q AS (INSERT INTO queue_ready (${ENTRY_COLS})
                SELECT ${entryColsBack('attempt + $4')} FROM d
                ON CONFLICT (step_id) DO NOTHING)
     SELECT ${leaseCols('d')} FROM d ${FREED}`,
    [...refs(p.items), p.runnerId ?? null, p.newAttempt ? 1 : 0],
  );
  return rows.map(mapLease);
}

/**
 * Delivered offers nobody acked by their deadline: back on the queue as the next attempt. `now`
 * is the database's clock unless given (a test sets the time instead of rewriting deadlines).
 */
export async function leaseRequeueUnacked(client: PoolClient, p: { limit: number; now?: Date }): Promise<LeaseRow[]> {
  const { rows: due } = await client.query(
    `SELECT step_id, token FROM step_leases
      WHERE acked_at IS NULL AND ack_deadline IS NOT NULL AND ack_deadline < coalesce($2::timestamptz, now())
      ORDER BY ack_deadline LIMIT $1 FOR UPDATE SKIP LOCKED`,
    [p.limit, p.now ?? null],
  );
  return leaseReturn(client, { items: due.map((r) => ({ stepId: Number(r.step_id), token: String(r.token) })), newAttempt: true });
}

/**
 * Delivered leases past their expiry: the runner went silent. Fenced (deleted), recorded done so
 * a late completion or a repeat enqueue of that attempt changes nothing, pool holds dropped.
 * Undelivered leases past expiry go back to the queue at their original attempt instead. `now` as
 * for leaseRequeueUnacked.
 */
export async function leaseExpireDue(client: PoolClient, p: { limit: number; now?: Date }): Promise<{ lost: LeaseRow[]; returned: LeaseRow[] }> {
  const { rows: due } = await client.query(
    `SELECT step_id, token, delivered_at IS NOT NULL AS delivered FROM step_leases
      WHERE expires_at < coalesce($2::timestamptz, now()) ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED`,
    [p.limit, p.now ?? null],
  );
  const delivered = due.filter((r) => r.delivered).map((r) => ({ stepId: Number(r.step_id), token: String(r.token) }));
  const undelivered = due.filter((r) => !r.delivered).map((r) => ({ stepId: Number(r.step_id), token: String(r.token) }));
  let lost: LeaseRow[] = [];
  if (delivered.length > 0) {
    const { rows } = await client.query(
      `WITH d AS (DELETE FROM step_leases l USING unnest($1::bigint[], $2::bigint[]) AS m(step_id, token)
                   WHERE l.step_id = m.step_id AND l.token = m.token RETURNING l.*),
            ${doneCte('NULL')},
            ${HOLDS_CTE}
       SELECT ${leaseCols('d')} FROM d ${FREED}`,
      refs(delivered),
    );
    lost = rows.map(mapLease);
  }
  const returned = await leaseReturn(client, { items: undelivered, newAttempt: false });
  return { lost, returned };
}

/** run id → runner id of the pins among these runs. */
export async function pinsForRuns(db: Db, runIds: number[]): Promise<Map<number, string>> {
  const out = new Map<number, string>();
  if (runIds.length === 0) return out;
  const { rows } = await db.query(`SELECT run_id, runner_id FROM run_pins WHERE run_id = ANY($1::bigint[])`, [runIds]);
  for (const r of rows) out.set(Number(r.run_id), r.runner_id);
  return out;
}

/** Writes pins before the deliveries that create them; an existing pin is never re-pointed. */
export async function pinsCreate(client: PoolClient, pins: Array<{ runId: number; runnerId: string }>): Promise<void> {
  if (pins.length === 0) return;
  await client.query(
    `INSERT INTO run_pins (run_id, runner_id) SELECT * FROM unnest($1::bigint[], $2::text[]) ON CONFLICT (run_id) DO NOTHING`,
    [pins.map((p) => p.runId), pins.map((p) => p.runnerId)],
  );
}

/** run id → number of its steps out on leases now. */
export async function leasesOutstandingByRun(db: Db, runIds: number[]): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  if (runIds.length === 0) return out;
  const { rows } = await db.query(`SELECT run_id, count(*)::int AS n FROM step_leases WHERE run_id = ANY($1::bigint[]) GROUP BY run_id`, [runIds]);
  for (const r of rows) out.set(Number(r.run_id), r.n);
  return out;
}

export interface OfferDetail {
  stepId: number;
  runId: number;
  step: string;
  command: string;
  env: Record<string, string>;
  timeoutMs: number | null;
  maxParallelSteps: number;
  /** The webhook payload of a run a webhook started (written to a file in the step's work dir). */
  webhookPayload: string | null;
  /** The run's trace: its id and the caller's span and flags (for the step's TRACEPARENT). */
  trace: { traceId: string | null; parentSpanId: string | null; parentFlags: number | null };
}

const mapDetail = (r: any): OfferDetail => ({
  stepId: Number(r.detail_step_id),
  runId: Number(r.detail_run_id),
  step: r.detail_step,
  command: r.detail_command,
  env: r.detail_env ?? {},
  timeoutMs: r.detail_timeout_ms,
  maxParallelSteps: r.detail_max_parallel_steps,
  webhookPayload: r.detail_webhook_payload ?? null,
  trace: { traceId: r.detail_trace_id ?? null, parentSpanId: r.detail_trace_parent_span ?? null, parentFlags: r.detail_trace_flags ?? null },
});

/** What a runner needs to execute delivered steps: command, merged env (run, then step), timeout. */
export async function offerDetails(db: Db, stepIds: number[]): Promise<Map<number, OfferDetail>> {
  const out = new Map<number, OfferDetail>();
  if (stepIds.length === 0) return out;
  const { rows } = await db.query(`SELECT ${DETAIL_COLS} FROM steps s JOIN runs r ON r.id = s.run_id WHERE s.id = ANY($1::bigint[])`, [stepIds]);
  for (const r of rows) out.set(Number(r.detail_step_id), mapDetail(r));
  return out;
}
