import { LANE_NAMES, SHARD_COUNT, type Classification, type PlacementRequirement, type QueueEntry } from '../core/entry.js';
import { textArrayOrNullSql } from './arrays.js';
import type { PoolClient, Db } from './pool.js';
import { prepared } from './prepared.js';

/**
 * A queue entry's fair-share weight, as every enqueue writes it: its project's, 1 for a project
 * with no row. Taken in the statement, so a weight set by the lever applies from the next enqueue.
 */
export const projectWeightSql = (fairKey: string) => `coalesce((SELECT p.weight FROM projects p WHERE p.name = ${fairKey}), 1)`;

/** A queue entry's columns as an enqueue writes them: the step, its run's shard and its classification. */
export const ENQUEUED_COLUMNS = ['step_id', 'run_id', 'shard', 'attempt', 'priority', 'lane', 'fair_key', 'weight', 'pools', 'requirement', 'load',
  'run_scope', 'max_parallel', 'site_stamp'] as const;

/** Every column of a queue entry (what mapEntry reads), in one order: a lease row carries them so it can go back unchanged. */
const ENTRY_COLUMNS = [...ENQUEUED_COLUMNS, 'ready_at', 'position', 'waited'];
export const ENTRY_COLS = ENTRY_COLUMNS.join(', ');
export const entryCols = (alias: string) => ENTRY_COLUMNS.map((c) => `${alias}.${c}`).join(', ');

/** The entry columns of ended leases, to insert back into queue_ready, with the attempt they go back as. */
export const entryColsBack = (attempt: string) => ENTRY_COLUMNS.map((c) => (c === 'attempt' ? attempt : c)).join(', ');

/** The channel every write that queues work notifies, and every dispatcher listens on. */
export const QUEUE_CHANNEL = 'opschain_queue';

/**
 * A pool slot freed, announced on the queue channel (SQL over a pool name `pool`): the payload is
 * `pool:NAME`, the key entries set aside on that pool carry (core/blocking.ts), so a release on
 * any replica has every replica check those entries at once. Sent on commit, one per pool and
 * transaction.
 */
export const poolFreedNotify = (pool: string) => `pg_notify('${QUEUE_CHANNEL}', 'pool:' || ${pool})`;

/** The blocking key a queue-channel payload announces freed (`pool:NAME`), or null: work was queued. */
export function freedKeyOf(payload: string | undefined): string | null {
  return payload?.startsWith('pool:') ? payload : null;
}

export interface EnqueueItem extends Classification {
  stepId: number;
  runId: number;
  attempt: number;
}

export const mapEntry = (r: any): QueueEntry => ({
  stepId: Number(r.step_id),
  runId: Number(r.run_id),
  shard: r.shard,
  attempt: r.attempt,
  priority: r.priority,
  lane: r.lane,
  fairKey: r.fair_key,
  weight: Number(r.weight),
  pools: r.pools ?? [],
  requirement: (r.requirement as PlacementRequirement | null) ?? null,
  load: Number(r.load),
  runScope: r.run_scope,
  maxParallel: r.max_parallel,
  siteStamp: r.site_stamp,
  readyAt: r.ready_at,
  position: Number(r.position),
  ...(r.blocked_on ? { blockedOn: r.blocked_on as string } : {}),
});

const enqueueSql = (returning: string) =>
  `WITH q AS (
     INSERT INTO queue_ready (${ENQUEUED_COLUMNS.join(', ')})
     SELECT i.step_id, i.run_id, run_shard(i.run_id), i.attempt, i.priority, i.lane, i.fair_key, ${projectWeightSql('i.fair_key')},
            ${textArrayOrNullSql('i.pools')}, i.requirement, i.load, i.run_scope, i.max_parallel, i.site_stamp
       FROM jsonb_to_recordset($1::jsonb) AS i(step_id bigint, run_id bigint, attempt int, priority smallint,
              lane smallint, fair_key text, pools jsonb, requirement jsonb, load real, run_scope boolean,
              max_parallel int, site_stamp text)
      WHERE NOT EXISTS (SELECT 1 FROM completed_attempts d WHERE d.step_id = i.step_id AND d.attempt = i.attempt)
        AND NOT EXISTS (SELECT 1 FROM step_leases l WHERE l.step_id = i.step_id)
      ORDER BY i.step_id
     ON CONFLICT (step_id) DO NOTHING
     RETURNING ${returning})`;

const QUEUE_ENQUEUE = prepared(
  `${enqueueSql('step_id')}
   -- Wakes every replica's dispatcher on commit when something was queued (one notification
   -- however many rows: PostgreSQL folds identical ones within a transaction).
   SELECT step_id, pg_notify('${QUEUE_CHANNEL}', '') IS NULL AS woke FROM q`,
);

/** The enqueue that wakes nobody and returns each entry whole: its caller decides who must hear of it. */
const QUEUE_ENQUEUE_QUIET = prepared(`${enqueueSql('*')} SELECT * FROM q`);

const enqueueJson = (items: EnqueueItem[]) =>
  JSON.stringify(
    items.map((i) => ({
      step_id: i.stepId,
      run_id: i.runId,
      attempt: i.attempt,
      priority: i.priority,
      lane: i.lane,
      fair_key: i.fairKey,
      pools: i.pools,
      requirement: i.requirement,
      load: i.load,
      run_scope: i.runScope,
      max_parallel: i.maxParallel,
      site_stamp: i.siteStamp,
    })),
  );

/**
 * Idempotent per (step, attempt), in one statement that also takes each entry's weight and wakes
 * the dispatchers: an attempt recorded done, a step holding a lease, or a step already ready is
 * left alone. Returns the step ids actually queued.
 */
export async function queueEnqueue(db: Db, items: EnqueueItem[]): Promise<number[]> {
  if (items.length === 0) return [];
  const { rows } = await db.query(QUEUE_ENQUEUE([enqueueJson(items)]));
  return rows.map((r) => Number(r.step_id));
}

/**
 * queueEnqueue without the notification: returns the entries queued, whole, for a caller that may
 * take them in the same transaction. Whatever it leaves queued it must announce (queueNotify)
 * before its commit, or no dispatcher hears of it until its next poll.
 */
export async function queueEnqueueQuiet(db: Db, items: EnqueueItem[]): Promise<QueueEntry[]> {
  if (items.length === 0) return [];
  const { rows } = await db.query(QUEUE_ENQUEUE_QUIET([enqueueJson(items)]));
  return rows.map(mapEntry);
}

/**
 * Removes a run's ready entries (cancel); returns the step ids removed. Rows are taken in step
 * order through the primary key, as a delivery takes them, so the two wait on each other instead
 * of deadlocking.
 */
export async function queueRemoveRun(db: Db, runId: number): Promise<number[]> {
  const { rows } = await db.query(`DELETE FROM queue_ready WHERE step_id = ANY(ARRAY(SELECT id FROM steps WHERE run_id = $1 ORDER BY id)) RETURNING step_id`, [runId]);
  return rows.map((r) => Number(r.step_id));
}

export interface ClaimParams {
  /** Shards whose lease this replica holds now. */
  shards: number[];
  limit: number;
  /** Page after this (lane, position) within the same tick. */
  after?: { lane: number; position: number };
  /** This replica's site: its site's stamped entries are claimable from any shard. */
  site?: string | null;
  /**
   * Sites with a live replica. Another site's stamped entry is left to that site while it is
   * live and the entry fresh; a stamp naming no live site is claimable anywhere. Empty: no
   * replica has a site, stamps are ignored and only shard ownership counts.
   */
  liveSites?: string[];
  /** The aged any-shard lane: entries ready at least this long, whichever shard, among the first `limit` of their lane. Null: off. */
  agedAfterMs?: number | null;
  /** Lock the entries `FOR UPDATE SKIP LOCKED` (the default), or only read them. */
  lock?: boolean;
}

const LANE_IDS = LANE_NAMES.map((_, i) => i);

/**
 * Locks up to `limit` due entries in (lane, position) order, skipping rows another dispatcher
 * holds. Must run inside the delivery transaction: rows not delivered stay exactly where they
 * were when it commits. With `lock: false` it only reads them, and the delivery's own delete
 * decides which it takes (an entry gone meanwhile is not leased). Claimable are:
 *
 *  - fresh entries of the owned shards (unless stamped for another live site);
 *  - this replica's own site's stamped entries, from any shard;
 *  - stamped entries whose site has no live replica, from any shard;
 *  - any entry that has waited `agedAfterMs` (the aged lane), from any shard, among the first
 *    `limit` of its lane in claim order (the longest waiting are there).
 */
export async function queueClaim(client: PoolClient, p: ClaimParams): Promise<QueueEntry[]> {
  const site = p.site ?? null;
  const liveSites = p.liveSites ?? [];
  const aged = p.agedAfterMs ?? null;
  const crossShard = aged !== null || site !== null || liveSites.length > 0;
  if ((p.shards.length === 0 && !crossShard) || p.limit <= 0) return [];
  // Owning every shard in an estate without sites, the aged lane could add nothing.
  const agedLane = aged !== null && (p.shards.length < SHARD_COUNT || liveSites.length > 0) ? aged : null;
  // Only owned shards, no site and no aged lane: the cross-shard branches are false, and without
  // them the claim, planned on every call, plans in about 60% of the time.
  const ownedOnly = agedLane === null && site === null && liveSites.length === 0;
  const claimable = ownedOnly
    ? `shard = ANY($1::smallint[])`
    : `(
              (shard = ANY($1::smallint[])
                AND (site_stamp IS NULL OR cardinality($6::text[]) = 0 OR site_stamp = $5::text OR site_stamp <> ALL($6::text[])))
           OR ($5::text IS NOT NULL AND site_stamp = $5::text)
           OR (site_stamp IS NOT NULL AND cardinality($6::text[]) > 0 AND site_stamp <> ALL($6::text[]))
           -- The aged lane, from the head of each lane: entries are queued in position order, so
           -- the ones that have waited longest are first in it (a return keeps both its position
           -- and its ready time). Reading the first $2 of each lane through the order index
           -- costs a few index pages however deep the queue, where an index on ready_at cost
           -- every enqueue an entry.
           OR step_id = ANY(ARRAY(
                SELECT h.step_id FROM unnest($8::smallint[]) AS l(lane)
                 CROSS JOIN LATERAL (SELECT x.step_id, x.ready_at FROM queue_ready x
                                      WHERE x.lane = l.lane AND x.blocked_on IS NULL AND ($3::int IS NULL OR (x.lane, x.position) > ($3::int, $4::bigint))
                                      ORDER BY x.position LIMIT $2) h
                 WHERE $7::bigint IS NOT NULL AND h.ready_at <= now() - $7::bigint * interval '1 millisecond'))
        )`;
  const values: unknown[] = [p.shards, p.limit, p.after?.lane ?? null, p.after?.position ?? null];
  if (!ownedOnly) values.push(site, liveSites, agedLane, LANE_IDS);
  const { rows } = await client.query(
    `SELECT * FROM queue_ready
      WHERE ready_at <= now() AND blocked_on IS NULL
        AND ($3::int IS NULL OR (lane, position) > ($3::int, $4::bigint))
        AND ${claimable}
      ORDER BY lane, position
      LIMIT $2${p.lock === false ? '' : `
      FOR UPDATE SKIP LOCKED`}`,
    values,
  );
  return rows.map(mapEntry);
}

/**
 * Sets entries aside out of the claim path, each keyed by what would make it placeable again
 * (core/blocking.ts). An entry delivered, cancelled or already set aside meanwhile is left alone.
 */
export async function queueBlock(db: Db, items: Array<{ stepId: number; on: string; verdict: string }>): Promise<number> {
  if (items.length === 0) return 0;
  const { rowCount } = await db.query(
    `UPDATE queue_ready q SET blocked_on = b.on_key, blocked_at = now(), blocked_verdict = b.verdict
       FROM unnest($1::bigint[], $2::text[], $3::text[]) AS b(step_id, on_key, verdict)
      WHERE q.step_id = b.step_id AND q.blocked_on IS NULL`,
    [items.map((i) => i.stepId), items.map((i) => i.on), items.map((i) => i.verdict)],
  );
  return rowCount ?? 0;
}

/** One blocked entry standing for every entry blocked on the same key with the same requirement and load, and how many those are. */
export interface BlockedGroup {
  entry: QueueEntry & { blockedOn: string };
  count: number;
}

/**
 * The blocked entries of these shards, one per (key, requirement, load): entries alike in those
 * get the same verdict, so one stands for all.
 */
export async function queueBlockedRead(db: Db, p: { shards: number[]; keys?: string[] }): Promise<BlockedGroup[]> {
  // Grouped by hashing, not by sorting the whole blocked set on its requirement documents; the
  // lowest step id of a group stands for it.
  const { rows } = await db.query(
    `WITH g AS (SELECT min(step_id) AS step_id, count(*) AS n
                  FROM queue_ready
                 WHERE blocked_on IS NOT NULL AND shard = ANY($1::smallint[]) AND ($2::text[] IS NULL OR blocked_on = ANY($2::text[]))
                 GROUP BY blocked_on, requirement, load)
     SELECT q.*, g.n FROM g JOIN queue_ready q ON q.step_id = g.step_id`,
    [p.shards, p.keys ?? null],
  );
  return rows.map((r) => ({ entry: mapEntry(r) as QueueEntry & { blockedOn: string }, count: Number(r.n) }));
}

/**
 * Puts blocked entries of these shards back in the claim path, by group (key, requirement, load),
 * at their own position; wakes every dispatcher on commit when any came back. Returns how many.
 */
export async function queueUnblock(db: Db, p: { shards: number[]; groups: Array<Pick<QueueEntry, 'requirement' | 'load'> & { blockedOn: string }> }): Promise<number> {
  if (p.groups.length === 0) return 0;
  const { rows } = await db.query(
    `WITH u AS (
       -- The time set aside is added to the entry's waits under the verdict it was set aside on.
       UPDATE queue_ready q SET blocked_on = NULL, blocked_at = NULL, blocked_verdict = NULL,
              waited = jsonb_set(coalesce(q.waited, '{}'), ARRAY[coalesce(q.blocked_verdict, 'blocked')],
                                 to_jsonb(coalesce((q.waited ->> coalesce(q.blocked_verdict, 'blocked'))::bigint, 0)
                                          + greatest(0, round(extract(epoch FROM now() - q.blocked_at) * 1000))::bigint))
         FROM unnest($2::text[], $3::jsonb[], $4::real[]) AS g(on_key, requirement, load)
        WHERE q.blocked_on = g.on_key AND q.requirement IS NOT DISTINCT FROM g.requirement AND q.load = g.load
          AND q.shard = ANY($1::smallint[])
       RETURNING 1)
     SELECT count(*)::int AS n, CASE WHEN count(*) > 0 THEN pg_notify('${QUEUE_CHANNEL}', '') END FROM u`,
    [p.shards, p.groups.map((g) => g.blockedOn), p.groups.map((g) => (g.requirement === null ? null : JSON.stringify(g.requirement))), p.groups.map((g) => g.load)],
  );
  return rows[0].n;
}

/** Wakes every replica's dispatcher on commit (LISTEN on QUEUE_CHANNEL). */
export async function queueNotify(db: Db): Promise<void> {
  await db.query(`SELECT pg_notify('${QUEUE_CHANNEL}', '')`);
}

export async function queueDepth(db: Db): Promise<number> {
  const { rows } = await db.query(`SELECT count(*)::bigint AS n FROM queue_ready`);
  return Number(rows[0].n);
}
