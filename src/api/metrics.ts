import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { DEMAND_REASONS, demandOf } from '../core/capacity.js';
import { LANE_NAMES, SHARD_COUNT } from '../core/entry.js';
import { on } from '../events.js';
import { LEASE_VACUUM_EVERY } from '../dispatch/group-commit.js';
import type { FastifyInstance } from 'fastify';
import type { ReplicaEnv, ShardOwnership } from '../context.js';
import { queueLaneDepth } from '../store/admin-queue.js';
import { capacityRead } from '../store/capacity.js';
import { gaugeSnapshotRead } from '../store/metrics.js';
import { isStoreUnavailable, poolObserve } from '../store/pool.js';
import { postureRead } from '../store/posture.js';

export const METRICS_PREFIX = 'opschain_';
const RUNNER_STATES = ['online', 'watch', 'offline'] as const;
/** The `pool` label of the holds of every pool not defined with `pools set`. */
export const UNDEFINED_POOLS = 'other';
const laneName = (lane: number) => LANE_NAMES[lane] ?? 'bulk';

/**
 * Every opschain metric of one replica, in its own registry (several replicas may share a
 * process in tests). Labels are closed sets: lanes, outcomes, statuses, reasons, route templates,
 * pool names (operator-defined and few); never a run, step or runner id.
 */
export class OpschainMetrics {
  readonly registry = new Registry();
  private readonly r = [this.registry];

  readonly acquireOutcomes = new Counter({ name: 'opschain_acquire_outcomes_total', help: 'Runner acquire long polls by outcome: offer (handed work), empty (window ended), held (drained runner or replica out of the membership); fenced counts lease calls answered "lease expired or revoked".', labelNames: ['outcome'], registers: this.r });
  readonly leaseFenced = new Counter({ name: 'opschain_lease_fenced_total', help: 'Lease calls answered "lease expired or revoked", by call.', labelNames: ['call'], registers: this.r });
  readonly deliveryWait = new Histogram({
    name: 'opschain_ready_to_delivered_wait_seconds',
    help: 'How long a step waited from ready (due) to delivered to a runner, by lane (database clock).',
    labelNames: ['lane'],
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600],
    registers: this.r,
  });
  readonly completions = new Counter({ name: 'opschain_completions_total', help: 'Step attempts finished through the lease plane, by status (system_error: runner lost).', labelNames: ['status'], registers: this.r });
  readonly expiries = new Counter({ name: 'opschain_lease_expiries_total', help: 'Leases ended by the expiry sweep, by reason: runner_lost (delivered, TTL passed), ack_deadline (offer never acked, requeued), claim_expired (undelivered claim returned).', labelNames: ['reason'], registers: this.r });
  readonly leaseVacuums = new Counter({ name: 'opschain_lease_table_vacuums_total', help: `Vacuums of the lease table this replica ran as its completions emptied it (one per ${LEASE_VACUUM_EVERY.toLocaleString('en-US')} leases ended), by outcome: ok or failed.`, labelNames: ['outcome'], registers: this.r });
  readonly storeErrors = new Counter({ name: 'opschain_store_errors_total', help: 'Store calls that failed: unavailable (connection refused, timeout, server gone) or query (any other error).', labelNames: ['kind'], registers: this.r });
  readonly storeLatency = new Histogram({
    name: 'opschain_store_query_duration_seconds',
    help: 'Duration of each store query of this replica.',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: this.r,
  });
  readonly httpRequests = new Counter({ name: 'opschain_http_requests_total', help: 'HTTP requests answered, by method, route template and status code.', labelNames: ['method', 'route', 'status'], registers: this.r });

  readonly readyDepth = new Gauge({ name: 'opschain_queue_ready_depth', help: 'Ready entries waiting in the queue, by lane (store-wide: every replica reports the same value).', labelNames: ['lane'], registers: this.r });
  readonly readyEstimated = new Gauge({ name: 'opschain_queue_ready_depth_estimated', help: '1 when the lane is deeper than the exact-count bound and its depth is a statistics estimate.', labelNames: ['lane'], registers: this.r });
  readonly oldestWait = new Gauge({ name: 'opschain_queue_oldest_wait_seconds', help: 'How long the head of each lane (its next entry in claim order) has been ready; 0 when the lane is empty (store-wide).', labelNames: ['lane'], registers: this.r });
  readonly leases = new Gauge({ name: 'opschain_leases', help: 'Live leases by stage: claimed (not delivered), delivered (not yet executing), executing (store-wide).', labelNames: ['stage'], registers: this.r });
  readonly poolOccupants = new Gauge({ name: 'opschain_pool_holds', help: 'Steps holding each pool defined with pools set (store-wide); pool="other": every other pool a run file names.', labelNames: ['pool'], registers: this.r });
  readonly poolLimit = new Gauge({ name: 'opschain_pool_limit', help: 'The limit of each pool defined with pools set.', labelNames: ['pool'], registers: this.r });
  readonly runners = new Gauge({ name: 'opschain_runners', help: 'Registered runners by liveness state (store-wide).', labelNames: ['state'], registers: this.r });
  readonly runnersDrained = new Gauge({ name: 'opschain_runners_drained', help: 'Registered runners under an operator drain, themselves or through their group.', registers: this.r });
  readonly posture = new Gauge({ name: 'opschain_posture', help: '1 while a fleet-wide posture is in force: fleet_quiesced, platform_halted, system_quiesced.', labelNames: ['posture'], registers: this.r });
  readonly shardsOwned = new Gauge({ name: 'opschain_shards_owned', help: `Shards (of ${SHARD_COUNT}) whose lease this replica holds.`, registers: this.r });
  readonly leader = new Gauge({ name: 'opschain_leader', help: '1 while this replica holds the leader lease.', registers: this.r });
  readonly member = new Gauge({ name: 'opschain_replica_member', help: '1 while this replica is in the live membership (0 while quiesced).', registers: this.r });
  readonly parked = new Gauge({ name: 'opschain_acquires_parked', help: 'Runner acquire calls parked on this replica now.', registers: this.r });
  readonly groupDemand = new Gauge({
    name: 'opschain_group_demand',
    help: `Ready entries attributed to each runner group (a group that exists, "(none)" for runners with no group, "(unmatched)" for work no runner matches), by why they wait: ${DEMAND_REASONS.join(', ')}. reason="capacity" is the autoscaling signal: more runners of that group would start them now (docs/autoscaling.md).`,
    labelNames: ['group', 'reason'],
    registers: this.r,
  });
  readonly groupOldestWait = new Gauge({ name: 'opschain_group_oldest_wait_seconds', help: 'How long the oldest capacity-bound entry of each runner group has been ready; 0 when none (database clock).', labelNames: ['group'], registers: this.r });
  readonly groupRunners = new Gauge({ name: 'opschain_group_runners', help: 'Registered runners of each group by condition: offline, else drained, else busy (a lease out), else idle.', labelNames: ['group', 'state'], registers: this.r });
  readonly storeUp = new Gauge({ name: 'opschain_store_up', help: '1 when this scrape could read the store; 0 and the store-wide gauges are stale when it could not.', registers: this.r });

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: METRICS_PREFIX });
    // Every closed label value exists from the start, so a rate over a quiet series reads 0, not absent.
    for (const o of ['offer', 'empty', 'held', 'fenced']) this.acquireOutcomes.inc({ outcome: o }, 0);
    for (const s of ['succeeded', 'failed', 'system_error']) this.completions.inc({ status: s }, 0);
    for (const r of ['runner_lost', 'ack_deadline', 'claim_expired']) this.expiries.inc({ reason: r }, 0);
    for (const k of ['unavailable', 'query']) this.storeErrors.inc({ kind: k }, 0);
    for (const o of ['ok', 'failed']) this.leaseVacuums.inc({ outcome: o }, 0);
  }

  storeQuery(seconds: number | null, err?: unknown): void {
    if (seconds !== null) this.storeLatency.observe(seconds);
    if (err !== undefined) this.storeErrors.inc({ kind: isStoreUnavailable(err) ? 'unavailable' : 'query' });
  }
}

/** Reads what the scrape reports as gauges: the store-wide aggregates and this replica's own state. */
async function refreshGauges(m: OpschainMetrics, ctx: ReplicaEnv & MetricsSources): Promise<void> {
  m.shardsOwned.set(ctx.ownership.owned().length);
  m.leader.set(ctx.ownership.isLeader() ? 1 : 0);
  m.member.set(ctx.ownership.inMembership() ? 1 : 0);
  m.parked.set(ctx.parked());
  try {
    const [depth, snap, posture] = await Promise.all([queueLaneDepth(ctx.pool), gaugeSnapshotRead(ctx.pool), postureRead(ctx.pool)]);
    m.storeUp.set(1);
    for (const [lane, name] of LANE_NAMES.entries()) {
      const l = depth.lanes.find((x) => x.lane === lane);
      m.readyDepth.set({ lane: name }, l?.ready ?? 0);
      m.readyEstimated.set({ lane: name }, l?.estimated ? 1 : 0);
      m.oldestWait.set({ lane: name }, l?.oldestReadyAt ? Math.max(0, (depth.now.getTime() - l.oldestReadyAt.getTime()) / 1000) : 0);
    }
    for (const [stage, n] of Object.entries(snap.leases)) m.leases.set({ stage }, n);
    // Pools come and go: start from empty so a removed pool's series disappears. Only pools an
    // admin defined get a series; the names a run file makes up share one, so a run file cannot
    // choose how many series this open endpoint carries. A defined pool named "other" shares it too.
    m.poolOccupants.reset();
    m.poolLimit.reset();
    m.poolOccupants.set({ pool: UNDEFINED_POOLS }, snap.undefinedPoolOccupants);
    for (const p of snap.pools) {
      m.poolOccupants.inc({ pool: p.name }, p.holds);
      m.poolLimit.set({ pool: p.name }, p.limit);
    }
    for (const s of RUNNER_STATES) m.runners.set({ state: s }, snap.runners.byState[s] ?? 0);
    m.runnersDrained.set(snap.runners.drained);
    // Groups come and go: start from empty so a removed group's series disappear.
    const capacity = await capacityRead(ctx.pool);
    const demand = demandOf(capacity, { acceptExceeding: ctx.config.acceptExceeding });
    m.groupDemand.reset();
    m.groupOldestWait.reset();
    m.groupRunners.reset();
    for (const g of demand.groups) {
      for (const reason of DEMAND_REASONS) m.groupDemand.set({ group: g.group, reason }, g.byReason[reason]);
      m.groupOldestWait.set({ group: g.group }, g.oldestCapacityWaitSeconds);
      for (const [state, n] of Object.entries(g.runners)) m.groupRunners.set({ group: g.group, state }, n);
    }
    m.posture.set({ posture: 'fleet_quiesced' }, posture.fleetQuiesced ? 1 : 0);
    m.posture.set({ posture: 'platform_halted' }, posture.halted ? 1 : 0);
    m.posture.set({ posture: 'system_quiesced' }, posture.systemQuiesced ? 1 : 0);
  } catch (err) {
    // A scrape during an outage still answers: this replica's own counters are what matter then.
    m.storeUp.set(0);
    ctx.log.debug({ err: (err as Error).message }, 'metrics: store-wide gauges not refreshed');
  }
}

export interface MetricsOptions {
  defaultMetrics?: boolean;
}

/** What the replica's own gauges read: its ownership and its parked acquires. */
export interface MetricsSources {
  ownership: ShardOwnership;
  /** Runner acquire calls parked on this replica now. */
  parked: () => number;
}

/**
 * `GET /metrics` in the Prometheus text format. Open without a token, like /healthz and /readyz:
 * it carries aggregate counts with closed label sets and no ids or secrets (docs/metrics.md).
 */
export function registerMetrics(app: FastifyInstance, env: ReplicaEnv, sources: MetricsSources, opts: MetricsOptions = {}): void {
  const ctx = { ...env, ...sources };
  const m = new OpschainMetrics(opts);
  poolObserve(ctx.pool, (seconds, err) => m.storeQuery(seconds, err));
  const ev = ctx.events;
  on(ev, 'acquire:answered', (p) => m.acquireOutcomes.inc({ outcome: p.outcome }));
  on(ev, 'lease:fenced', (p) => {
    m.acquireOutcomes.inc({ outcome: 'fenced' }, p.count);
    m.leaseFenced.inc({ call: p.call }, p.count);
  });
  on(ev, 'dispatch:delivered', (p) => {
    for (const w of p.waits) m.deliveryWait.observe({ lane: laneName(w.lane) }, w.seconds);
  });
  on(ev, 'lease:finished', (p) => {
    for (const [status, n] of Object.entries(p.statuses)) if (n > 0) m.completions.inc({ status }, n);
  });
  on(ev, 'lease:expired', (p) => {
    if (p.lost > 0) {
      m.expiries.inc({ reason: 'runner_lost' }, p.lost);
      m.completions.inc({ status: 'system_error' }, p.lost);
    }
    if (p.requeued > 0) m.expiries.inc({ reason: 'ack_deadline' }, p.requeued);
    if (p.returned > 0) m.expiries.inc({ reason: 'claim_expired' }, p.returned);
  });
  on(ev, 'lease:vacuumed', (p) => m.leaseVacuums.inc({ outcome: p.outcome }));
  app.addHook('onResponse', async (req, reply) => {
    m.httpRequests.inc({ method: req.method, route: req.routeOptions?.url ?? 'unmatched', status: String(reply.statusCode) });
  });
  app.get('/metrics', async (_req, reply) => {
    await refreshGauges(m, ctx);
    reply.header('content-type', m.registry.contentType);
    return exposition(await m.registry.metrics());
  });
}

/**
 * prom-client writes a NaN sample (the event loop lag before its first measurement) as `Nan`; the
 * exposition format spells it `NaN`, and a strict scraper rejects the whole page otherwise.
 */
export function exposition(text: string): string {
  return text.replace(/^([^#].*) Nan$/gm, '$1 NaN');
}
