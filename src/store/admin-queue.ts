import type { LaneId, QueueEntry } from '../core/entry.js';
import type { PoolState } from '../core/plan.js';
import { SHARD_COUNT } from '../core/entry.js';
import { coordinationLeaseList, LEADER_LEASE, shardOfLeaseName } from './coordination.js';
import { queueVerdictInputsRead, scopedRunsOf, type FleetRunnerRow } from './fleet.js';
import { triggersQueueRead, type TriggerDueRow, type WaitingLaunchRow } from './triggers.js';
import { laneOfSql } from './lanes.js';
import { withSnapshot, type Db } from './pool.js';
import type { FleetPosture } from './posture.js';
import { ENTRY_COLS, mapEntry } from './queue.js';
import { replicaList, type ReplicaRow } from './replicas.js';

/** Ready depth and oldest waiting age of one lane. */
export interface LaneDepth {
  lane: LaneId;
  /** Exact up to the bound; beyond it an estimate from the table statistics (`estimated`). */
  ready: number;
  estimated: boolean;
  /** ready_at of the lane's head (its first entry in claim order), or null when the lane is empty. */
  oldestReadyAt: Date | null;
}

/**
 * Per-lane depth, cheap at any size: one statement. Each lane is counted exactly by an index-only
 * read of (lane, position) that stops at `bound`; a lane that reaches the bound is estimated from
 * the table's live-tuple statistics (pg_stat_user_tables, kept by every insert and delete, so no
 * ANALYZE is needed), shared among the deep lanes by the planner's lane frequencies when the
 * table has been analysed, else evenly. The oldest age is the ready_at of the lane's head in claim
 * order, one index probe. What a metrics exporter can call every scrape.
 */
export async function queueLaneDepth(db: Db, p: { bound?: number } = {}): Promise<{ now: Date; lanes: LaneDepth[] }> {
  const bound = p.bound ?? 5_000;
  const { rows } = await db.query(
    `SELECT l.lane, c.n, h.ready_at, now() AS db_now,
            (SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'queue_ready'::regclass) AS live_estimate,
            (SELECT CASE WHEN c.reltuples >= 0 AND c.relpages > 0
                         THEN c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::float8) END
               FROM pg_class c WHERE c.oid = 'queue_ready'::regclass) AS planner_estimate,
            (SELECT f.freq FROM pg_stats s,
                    unnest(s.most_common_vals::text::smallint[], s.most_common_freqs) AS f(val, freq)
              WHERE s.schemaname = current_schema() AND s.tablename = 'queue_ready' AND s.attname = 'lane' AND f.val = l.lane
              LIMIT 1) AS lane_freq
       FROM unnest('{0,1,2}'::smallint[]) AS l(lane)
       -- Claimable and blocked entries each have their own (lane, position) index: counted and
       -- headed through both.
       CROSS JOIN LATERAL (SELECT (SELECT count(*) FROM (SELECT 1 FROM queue_ready q WHERE q.lane = l.lane AND q.blocked_on IS NULL ORDER BY q.lane, q.position LIMIT $1) x)
                                + (SELECT count(*) FROM (SELECT 1 FROM queue_ready q WHERE q.lane = l.lane AND q.blocked_on IS NOT NULL ORDER BY q.lane, q.position LIMIT $1) y) AS n) c
       LEFT JOIN LATERAL (SELECT x.ready_at FROM ((SELECT q.position, q.ready_at FROM queue_ready q WHERE q.lane = l.lane AND q.blocked_on IS NULL ORDER BY q.position LIMIT 1)
                                                  UNION ALL
                                                  (SELECT q.position, q.ready_at FROM queue_ready q WHERE q.lane = l.lane AND q.blocked_on IS NOT NULL ORDER BY q.position LIMIT 1)) x
                           ORDER BY x.position LIMIT 1) h ON true
      ORDER BY l.lane`,
    [bound],
  );
  const now: Date = rows[0].db_now;
  const deep = rows.filter((r) => Number(r.n) >= bound);
  const exact = rows.filter((r) => Number(r.n) < bound).reduce((a, r) => a + Number(r.n), 0);
  const total = Math.max(Number(rows[0].live_estimate ?? 0), Number(rows[0].planner_estimate ?? 0));
  const remainder = Math.max(0, total - exact);
  const freqSum = deep.reduce((a, r) => a + (r.lane_freq === null ? 0 : Number(r.lane_freq)), 0);
  const allFreq = deep.every((r) => r.lane_freq !== null) && freqSum > 0;
  return {
    now,
    lanes: rows.map((r) => {
      const n = Number(r.n);
      const isDeep = n >= bound;
      const share = !isDeep ? 0 : allFreq ? Number(r.lane_freq) / freqSum : 1 / deep.length;
      return {
        lane: r.lane as LaneId,
        ready: isDeep ? Math.max(bound, Math.round(remainder * share)) : n,
        estimated: isDeep,
        oldestReadyAt: r.ready_at ?? null,
      };
    }),
  };
}

/** A live lease with the names an operator knows it by. */
export interface AdminLeaseRow {
  stepId: number;
  stepName: string | null;
  runId: number;
  runName: string | null;
  target: string | null;
  project: string | null;
  attempt: number;
  lane: LaneId;
  fairKey: string;
  holder: string;
  runnerId: string | null;
  claimedAt: Date;
  deliveredAt: Date | null;
  ackedAt: Date | null;
  renewedAt: Date | null;
  expiresAt: Date;
  executing: boolean;
  /** The TTL granted at the last claim, delivery, ack or renewal. */
  ttlMs: number;
}

/** An operator drain in force, with who pulled it and when (from the audit log). */
export interface AdminDrainRow {
  kind: 'runner' | 'group';
  /** The runner id or the group name. */
  key: string;
  name: string;
  reason: string | null;
  actor: string | null;
  at: Date | null;
}

/** Ready and leased counts of one fair key within one lane, and its recent deliveries. */
export interface AdminProjectRow {
  lane: LaneId;
  fairKey: string;
  weight: number;
  /** Deliveries in the window: leases delivered in it still live, plus attempts completed in it. */
  delivered: number;
}

export interface AdminPoolRow {
  name: string;
  limit: number;
  held: number;
}

/** Everything the admin queue view needs, from one REPEATABLE READ snapshot. */
export interface AdminQueueSnapshot {
  now: Date;
  lanes: LaneDepth[];
  /** How many ready entries each lane count reads exactly before it estimates. */
  exactBound: number;
  leasedByLane: Record<LaneId, number>;
  leases: AdminLeaseRow[];
  leasesTotal: number;
  projects: AdminProjectRow[];
  deliveryWindowMs: number;
  /** Deliveries in the window (all keys); `projects` splits at most the latest `deliverySample` of them. */
  deliveriesTotal: number;
  deliverySample: number;
  pools: AdminPoolRow[];
  replicas: ReplicaRow[];
  /** Shard n → the replica holding its lease now, or null. */
  shardOwners: Array<string | null>;
  leader: { replicaId: string; since: Date } | null;
  posture: FleetPosture;
  drains: AdminDrainRow[];
  runners: FleetRunnerRow[];
  /** The head of the queue in claim order, at most `sampleLimit` entries: what verdicts are counted over. */
  sample: QueueEntry[];
  sampleLimit: number;
  pins: Map<number, string>;
  outstandingByRun: Map<number, number>;
  runnerRuns: Map<string, number>;
  /** The next due schedules and one-shots, and the launches not yet fired (docs/triggers.md). */
  triggersDue: TriggerDueRow[];
  launchesWaiting: { items: WaitingLaunchRow[]; total: number };
}

export interface AdminQueueReadOptions {
  /** Most leases listed, oldest first (all are counted). */
  limit?: number;
  /** Ready entries read for the verdict counts. */
  sampleLimit?: number;
  /** Per-lane exact count bound. */
  exactBound?: number;
  deliveryWindowMs?: number;
  deliverySample?: number;
}

/**
 * The aggregate queue view in one REPEATABLE READ, read-only snapshot (an entry is never both
 * ready and leased in one answer) and a fixed number of set-based statements whatever the
 * queue's depth: lane depth (bounded, then estimated), leases (bounded by the fleet), the
 * projects' recent deliveries, pools, replicas, shard and leader leases, postures, drains,
 * runners, and a bounded head sample of ready entries for the verdict counts.
 */
export async function adminQueueRead(db: Db, opts: AdminQueueReadOptions = {}): Promise<AdminQueueSnapshot> {
  const limit = opts.limit ?? 100;
  const sampleLimit = opts.sampleLimit ?? 1_000;
  const exactBound = opts.exactBound ?? 5_000;
  const deliveryWindowMs = opts.deliveryWindowMs ?? 60_000;
  const deliverySample = opts.deliverySample ?? 5_000;
  const read = await withSnapshot(db, async (client) => {
    const depth = await queueLaneDepth(client, { bound: exactBound });
    const leases = await client.query(
      `SELECT l.step_id, l.run_id, l.attempt, l.lane, l.fair_key, l.holder, l.runner_id, l.claimed_at, l.delivered_at, l.acked_at,
              l.renewed_at, l.expires_at, l.executing, s.name AS step_name, r.name AS run_name, r.target, r.project,
              (extract(epoch FROM l.expires_at - greatest(l.claimed_at, l.delivered_at, l.acked_at, l.renewed_at)) * 1000)::bigint AS ttl_ms,
              count(*) OVER () AS total
         FROM step_leases l
         LEFT JOIN steps s ON s.id = l.step_id
         LEFT JOIN runs r ON r.id = l.run_id
        ORDER BY l.claimed_at, l.step_id
        LIMIT $1`,
      [limit],
    );
    const leasedLanes = await client.query(`SELECT lane, count(*)::bigint AS n FROM step_leases GROUP BY lane`);
    const projects = await client.query(
      `WITH recent AS (
         SELECT d.step_id FROM completed_attempts d WHERE d.done_at >= now() - $1 * interval '1 millisecond' ORDER BY d.done_at DESC LIMIT $2
       ), delivered AS (
         SELECT l.lane, l.fair_key, l.weight FROM step_leases l WHERE l.delivered_at >= now() - $1 * interval '1 millisecond'
         UNION ALL
         SELECT ${laneOfSql('coalesce(s.priority, r.priority)')},
                r.project, coalesce(p.weight, 1)
           FROM recent JOIN steps s ON s.id = recent.step_id JOIN runs r ON r.id = s.run_id LEFT JOIN projects p ON p.name = r.project
       )
       SELECT lane, fair_key, max(weight) AS weight, count(*)::bigint AS n,
              (SELECT count(*) FROM completed_attempts d WHERE d.done_at >= now() - $1 * interval '1 millisecond') AS done_total
         FROM delivered GROUP BY lane, fair_key ORDER BY lane, fair_key`,
      [deliveryWindowMs, deliverySample],
    );
    const pools = await client.query(
      `SELECT l.name, l.max_holders, (SELECT count(*) FROM pool_holds h WHERE h.pool = l.name) AS held FROM pool_limits l ORDER BY l.name`,
    );
    const replicas = await replicaList(client);
    const coordination = await coordinationLeaseList(client);
    const drains = await client.query(
      `SELECT d.kind, d.key, d.name, d.reason, a.actor, a.at
         FROM (SELECT 'runner' AS kind, id AS key, name, drain_reason AS reason FROM runners WHERE drained AND deleted_at IS NULL
               UNION ALL
               SELECT 'group', name, name, drain_reason FROM runner_groups WHERE drained) d
         LEFT JOIN LATERAL (SELECT actor, at FROM audit_log WHERE action = 'fleet.drain' AND target = d.kind || ':' || d.key ORDER BY id DESC LIMIT 1) a ON true
        ORDER BY d.kind DESC, d.name`,
    );
    // Named columns: what mapEntry reads and no more, on every refresh.
    const sample = await client.query(
      `(SELECT ${ENTRY_COLS}, blocked_on FROM queue_ready WHERE blocked_on IS NULL ORDER BY lane, position LIMIT $1)
       UNION ALL
       (SELECT ${ENTRY_COLS}, blocked_on FROM queue_ready WHERE blocked_on IS NOT NULL ORDER BY lane, position LIMIT $1)
       ORDER BY lane, position LIMIT $1`,
      [sampleLimit],
    );
    // The verdict inputs of the sampled entries, by the read the fleet queue's verdicts use; the
    // pools listed above are every limited pool, so their state is the one the verdicts read.
    const { runners, posture, pins, outstandingByRun } = await queueVerdictInputsRead(client, {
      runIds: sample.rows.map((r) => Number(r.run_id)),
      pools: new Map(pools.rows.map((r) => [r.name as string, { limit: r.max_holders, held: Number(r.held) }])),
    });
    const triggers = await triggersQueueRead(client, { limit: 20 });
    return { depth, leases, leasedLanes, projects, pools, replicas, coordination, posture, drains, runners, sample, pins, outstandingByRun, triggers };
  });
  const { depth, leases, leasedLanes, projects, pools, replicas, coordination, posture, drains, runners, sample, pins, outstandingByRun, triggers } = read;

    const leaderLease = coordination.find((l) => l.name === LEADER_LEASE);
    const leasedByLane: Record<LaneId, number> = { 0: 0, 1: 0, 2: 0 };
    for (const r of leasedLanes.rows) leasedByLane[r.lane as LaneId] = Number(r.n);
    const sampled = projects.rows.reduce((a, r) => a + Number(r.n), 0);
    const doneTotal = Number(projects.rows[0]?.done_total ?? 0);
    return {
      now: depth.now,
      lanes: depth.lanes,
      exactBound,
      leasedByLane,
      leases: leases.rows.map((r) => ({
        stepId: Number(r.step_id),
        stepName: r.step_name,
        runId: Number(r.run_id),
        runName: r.run_name,
        target: r.target,
        project: r.project,
        attempt: r.attempt,
        lane: r.lane,
        fairKey: r.fair_key,
        holder: r.holder,
        runnerId: r.runner_id,
        claimedAt: r.claimed_at,
        deliveredAt: r.delivered_at,
        ackedAt: r.acked_at,
        renewedAt: r.renewed_at,
        expiresAt: r.expires_at,
        executing: r.executing,
        ttlMs: Number(r.ttl_ms),
      })),
      leasesTotal: Number(leases.rows[0]?.total ?? 0),
      projects: projects.rows.map((r) => ({ lane: r.lane, fairKey: r.fair_key, weight: Number(r.weight), delivered: Number(r.n) })),
      deliveryWindowMs,
      deliveriesTotal: sampled + Math.max(0, doneTotal - deliverySample),
      deliverySample,
      pools: pools.rows.map((r) => ({ name: r.name, limit: r.max_holders, held: Number(r.held) })),
      replicas,
      shardOwners: Array.from({ length: SHARD_COUNT }, (_, n) => coordination.find((l) => shardOfLeaseName(l.name) === n)?.holder ?? null),
      leader: leaderLease ? { replicaId: leaderLease.holder, since: leaderLease.acquiredAt } : null,
      posture,
      drains: drains.rows.map((r) => ({ kind: r.kind, key: r.key, name: r.name, reason: r.reason, actor: r.actor, at: r.at })),
      runners,
      sample: sample.rows.map(mapEntry),
      sampleLimit,
      pins,
      outstandingByRun,
      runnerRuns: scopedRunsOf(runners),
      triggersDue: triggers.due,
      launchesWaiting: triggers.waiting,
    };
}

/** Pool state of the snapshot, as the verdict ladder reads it. */
export function adminPoolState(s: Pick<AdminQueueSnapshot, 'pools'>): PoolState {
  return new Map(s.pools.map((p) => [p.name, { limit: p.limit, held: p.held }]));
}
