import type { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import type { Clock } from '../clock.js';
import type { ServerConfig } from '../config.js';
import { shardsOf } from '../core/rendezvous.js';
import type { Logger } from '../logger.js';
import { startLoop } from '../loop.js';
import type { OrchestratorHooks } from '../orchestrator/contract.js';
import type { Feature, ServerContext } from '../context.js';
import {
  coordinationLeaseAcquire,
  coordinationLeaseList,
  coordinationLeaseRelease,
  coordinationNotify,
  COORDINATION_CHANNEL,
  LEADER_LEASE,
  membershipLive,
  replicaReap,
  schedulerDonePrune,
  shardLeaseName,
  shardOfLeaseName,
} from '../store/coordination.js';
import { listenChannel } from '../store/listen.js';
import { withTransaction, type Pool } from '../store/pool.js';
import { queueNotify } from '../store/queue.js';
import { claimReclaimDead, type ReclaimedClaim } from '../store/reclaim.js';
import { replicaHeartbeat, replicaRegister, replicaStop } from '../store/replicas.js';
import { runnerLivenessSweep, type LivenessChange } from '../store/runner-liveness.js';
import { VERSION } from '../version.js';
import { emit as emitCoordination, type TickReport } from '../events.js';
import { CoordinationState, OWNERSHIP_SAFETY_MS } from './state.js';

/** Built-in cadences of the coordination plane (no config keys, by design). */
export interface CoordinationTiming {
  /** The coordination tick. */
  tickMs: number;
  /** A replica whose heartbeat is older than this is dead. */
  stalenessMs: number;
  /** Shard leases: valid about three ticks, renewed every tick. */
  shardTtlMs: number;
  /** The cron-leader lease: valid three ticks, renewed every tick. */
  leaderTtlMs: number;
}

/** The aged any-shard lane and the site fallback: an entry waiting this long is claimable by any replica. */
export const SHARD_FALLBACK_MS = 15_000;

export const DEFAULT_TIMING: CoordinationTiming = { tickMs: 5_000, stalenessMs: 15_000, shardTtlMs: 15_000, leaderTtlMs: 15_000 };

/** Reclaim works in bounded batches so one sweep never holds many rows locked at once. */
const RECLAIM_BATCH = 500;
const RECLAIM_MAX_BATCHES = 20;

/** A pass run once per tick on the leader only (the lost-runner expiry sweep is one). */
export type LeaderPass = (p: { leaderToken: number }) => Promise<unknown>;

export interface CoordinationDeps {
  pool: Pool;
  replicaId: string;
  site: string | null;
  clock: Clock;
  log: Logger;
  events: EventEmitter;
  state: CoordinationState;
  timing: CoordinationTiming;
  config: Pick<ServerConfig, 'pollWindowMs' | 'replicaRetentionMs' | 'schedulerDoneRetentionDays'>;
  /** Told when a reclaimed exposed claim comes back as a new attempt. */
  hooks?: Pick<OrchestratorHooks, 'stepRequeued'>;
  leaderPasses?: LeaderPass[];
}

const sameList = (a: number[], b: number[]) => a.length === b.length && a.every((v, i) => v === b[i]);

/**
 * One coordination pass of one replica:
 *
 *  1. heartbeat (re-registering if the row vanished);
 *  2. read the live membership and compute this replica's rendezvous shards;
 *  3. release the shards no longer ours FIRST (local ownership dropped before the row goes), then
 *     claim the desired shards that are free, expired or already ours, so two replicas never
 *     hold one shard at the same instant;
 *  4. contend for (or, when quiesced, give up) the cron-leader lease;
 *  5. reclaim the un-acked claims of dead peers;
 *  6. on the leader: runner liveness, lost-runner expiry, replica reaping, scheduler_done retention.
 *
 * Every decision about time is the database's now(); the local clock only bounds how long this
 * replica trusts a lease it was granted.
 */
export async function coordinationOnce(deps: CoordinationDeps): Promise<TickReport> {
  const { pool, replicaId: me, state, timing, events, log } = deps;
  const tickStart = deps.clock.now();

  let beat = await replicaHeartbeat(pool, me);
  if (!beat) {
    // Our row was reaped while this process was frozen past the retention: come back as a member.
    log.warn({ replica: me }, 'membership row missing; registering again');
    await replicaRegister(pool, { id: me, host: hostname(), site: deps.site ?? undefined, version: VERSION });
    beat = { quiesced: false };
  }

  const live = await membershipLive(pool, { stalenessMs: timing.stalenessMs });
  const liveIds = live.map((m) => m.id);
  const member = !beat.quiesced && liveIds.includes(me);
  const wasMember = state.inMembership();
  state.setMembership(member, live.flatMap((m) => (m.site ? [m.site] : [])));
  if (wasMember !== member) emitCoordination(events, 'membership:changed', { replicaId: me, member });

  const desired = member ? shardsOf(me, liveIds) : [];
  const desiredSet = new Set(desired);
  const before = state.owned();
  const leases = await coordinationLeaseList(pool);
  const byName = new Map(leases.map((l) => [l.name, l]));

  const mineInStore = leases.flatMap((l) => {
    const s = shardOfLeaseName(l.name);
    return s !== undefined && l.holder === me ? [s] : [];
  });
  const release = [...new Set([...before, ...mineInStore])].filter((s) => !desiredSet.has(s)).sort((a, b) => a - b);
  if (release.length) {
    state.dropShards(release);
    await coordinationLeaseRelease(pool, { names: release.map(shardLeaseName), holder: me });
  }

  const claimable = desired.filter((s) => {
    const l = byName.get(shardLeaseName(s));
    return !l || l.holder === me;
  });
  // A live peer still holds shards that are now ours: wake it so it lets go now, not on its own tick.
  const liveSet = new Set(liveIds);
  const blocked = desired.filter((s) => {
    const l = byName.get(shardLeaseName(s));
    return l !== undefined && l.holder !== me && liveSet.has(l.holder);
  });
  // Only a new want is announced: a peer that cannot let go (stalled, not yet stale) is not woken
  // again every tick, and two waiting replicas never wake each other in a loop.
  const blockedKey = blocked.join(',');
  const blockedByLivePeer = blockedKey !== '' && blockedKey !== state.lastAnnouncedWant;
  state.lastAnnouncedWant = blockedKey;
  const granted = await coordinationLeaseAcquire(pool, { names: claimable.map(shardLeaseName), holder: me, ttlMs: timing.shardTtlMs });
  state.setShards(
    granted.map((g) => ({ shard: shardOfLeaseName(g.name)!, token: g.token })),
    tickStart + timing.shardTtlMs - OWNERSHIP_SAFETY_MS,
  );
  const owned = state.owned();
  const acquired = owned.filter((s) => !before.includes(s));
  const lost = before.filter((s) => !owned.includes(s));
  if (!sameList(before, owned)) emitCoordination(events, 'shards:changed', { replicaId: me, owned, added: acquired, removed: lost });

  const wasLeader = state.isLeader();
  let gaveUpLeader = false;
  if (member) {
    const [lease] = await coordinationLeaseAcquire(pool, { names: [LEADER_LEASE], holder: me, ttlMs: timing.leaderTtlMs });
    state.setLeader(lease?.token, tickStart + timing.leaderTtlMs - OWNERSHIP_SAFETY_MS);
  } else {
    state.setLeader(undefined, 0);
    if (byName.get(LEADER_LEASE)?.holder === me) {
      await coordinationLeaseRelease(pool, { names: [LEADER_LEASE], holder: me });
      gaveUpLeader = true;
    }
  }
  // Whatever we let go, peers take on their next tick: wake them so that is now.
  if (release.length > 0 || gaveUpLeader || blockedByLivePeer) await guarded(log, 'notify', () => coordinationNotify(pool, { from: me }), undefined);
  const leader = state.isLeader();
  if (leader && !wasLeader) {
    log.info({ replica: me, token: state.leaderToken() }, 'gained the cron-leader lease');
    emitCoordination(events, 'leader:gained', { replicaId: me, token: state.leaderToken()! });
  } else if (!leader && wasLeader) {
    log.info({ replica: me }, 'lost the cron-leader lease');
    emitCoordination(events, 'leader:lost', { replicaId: me });
  }

  const reclaimed = member ? await guarded(log, 'reclaim', () => reclaimDeadPeers(deps), []) : [];
  if (reclaimed.length) {
    log.info({ reclaimed: reclaimed.length, exposed: reclaimed.filter((r) => r.exposed).length, holders: [...new Set(reclaimed.map((r) => r.holder))] }, 'reclaimed the claims of dead replicas');
    emitCoordination(events, 'queue:enqueued', { stepIds: reclaimed.map((r) => r.stepId), source: 'reclaim' });
  }

  let liveness: LivenessChange[] = [];
  let reaped: string[] = [];
  let pruned = 0;
  if (leader) {
    const token = state.leaderToken()!;
    liveness = await guarded(log, 'runner liveness', () => runnerLivenessSweep(pool, { pollWindowMs: deps.config.pollWindowMs, graceMs: timing.stalenessMs }), []);
    for (const c of liveness) log.info({ runner: c.runnerId, from: c.from, to: c.to }, `runner ${c.to === 'offline' ? 'marked offline' : c.to === 'watch' ? 'on the watch list' : 'back online'}`);
    for (const pass of deps.leaderPasses ?? []) await guarded(log, 'leader pass', () => pass({ leaderToken: token }), undefined);
    reaped = await guarded(log, 'replica reaping', () => replicaReap(pool, { retentionMs: deps.config.replicaRetentionMs }), []);
    if (reaped.length) log.info({ reaped }, 'reaped replica rows past the retention');
    pruned = await guarded(log, 'scheduler_done retention', () => schedulerDonePrune(pool, { retentionDays: deps.config.schedulerDoneRetentionDays }), 0);
  }

  const report: TickReport = { replicaId: me, member, live, owned, desired, released: release, acquired, leader, reclaimed, liveness, reaped, pruned };
  emitCoordination(events, 'coordination:tick', report);
  return report;
}

/** A failing side duty is logged and skipped; it must not stop the heartbeat and leases. */
async function guarded<T>(log: Logger, what: string, fn: () => Promise<T>, fallback: T): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    log.warn({ err: (err as Error).message }, `coordination: ${what} failed; retrying next tick`);
    return fallback;
  }
}

/** Takes back the un-acked claims of dead peers in bounded batches, each with its requeue hooks, in one transaction per batch. */
export async function reclaimDeadPeers(deps: Pick<CoordinationDeps, 'pool' | 'replicaId' | 'timing' | 'hooks'>): Promise<ReclaimedClaim[]> {
  const all: ReclaimedClaim[] = [];
  for (let i = 0; i < RECLAIM_MAX_BATCHES; i++) {
    const batch = await withTransaction(deps.pool, async (client) => {
      const got = await claimReclaimDead(client, { me: deps.replicaId, stalenessMs: deps.timing.stalenessMs, limit: RECLAIM_BATCH });
      for (const r of got) {
        if (r.exposed && deps.hooks) {
          await deps.hooks.stepRequeued(client, { stepId: r.stepId, fromAttempt: r.attempt, toAttempt: r.requeuedAttempt, reason: `replica ${r.holder} lost before the runner acked` });
        }
      }
      // Every replica's dispatcher wakes on commit: the owners of those shards may be elsewhere.
      if (got.length > 0) await queueNotify(client);
      return got;
    });
    all.push(...batch);
    if (batch.length < RECLAIM_BATCH) break;
  }
  return all;
}

/** Clean shutdown: give up the leader lease first (so a peer takes over on its next tick), then the shards. */
export async function coordinationRelease(deps: Pick<CoordinationDeps, 'pool' | 'replicaId' | 'state' | 'events' | 'log'>): Promise<void> {
  const { pool, replicaId: me, state, events } = deps;
  const wasLeader = state.isLeader();
  const owned = state.owned();
  state.clear();
  if (wasLeader) emitCoordination(events, 'leader:lost', { replicaId: me });
  if (owned.length) emitCoordination(events, 'shards:changed', { replicaId: me, owned: [], added: [], removed: owned });
  await coordinationLeaseRelease(pool, { names: [LEADER_LEASE], holder: me });
  const held = (await coordinationLeaseList(pool)).filter((l) => l.holder === me).map((l) => l.name);
  await coordinationLeaseRelease(pool, { names: held, holder: me });
}

export interface CoordinationFeatureOptions {
  timing?: Partial<CoordinationTiming>;
  hooks?: Pick<OrchestratorHooks, 'stepRequeued'>;
  /** Passes run on the leader's tick, given the replica's context (e.g. the lost-runner expiry sweep). */
  leaderPasses?: Array<(ctx: ServerContext) => Promise<unknown>>;
}

/**
 * The coordination loop of a replica: replaces the lone-replica ownership on the context with the
 * lease-backed one, and releases everything it holds on clean shutdown.
 */
export function coordinationFeature(opts: CoordinationFeatureOptions = {}): Feature {
  return (ctx) => {
    const state = new CoordinationState(ctx.clock);
    const deps: CoordinationDeps = {
      pool: ctx.pool,
      replicaId: ctx.replicaId,
      site: ctx.config.site ?? null,
      clock: ctx.clock,
      log: ctx.log.child({ component: 'coordination' }),
      events: ctx.events,
      state,
      timing: { ...DEFAULT_TIMING, ...opts.timing },
      config: ctx.config,
      hooks: opts.hooks,
      leaderPasses: opts.leaderPasses?.map((pass) => () => pass(ctx)),
    };
    ctx.ownership = state;
    const loop = startLoop({
      name: 'coordination',
      clock: ctx.clock,
      log: deps.log,
      once: async () => {
        await coordinationOnce(deps);
        return deps.timing.tickMs;
      },
      errorDelayMs: 1_000,
    });
    ctx.loops.push(loop);
    // Leases released, wanted, or a replica quiesced anywhere: tick now.
    const listener = listenChannel(ctx.databaseUrl, COORDINATION_CHANNEL, (from) => {
        if (from !== ctx.replicaId) loop.kick();
      }, (err) => deps.log.debug({ err: err.message }, 'coordination listener reconnecting'));
    // Hand over at the very start of a clean shutdown, before HTTP drains its in-flight requests:
    // this replica stops dispatching at once, a peer takes the leader lease and the shards on its
    // next tick instead of after the 15 s expiry. The leases go before the row is marked stopped,
    // so no valid lease is ever held by a stopped replica.
    let released: Promise<void> | undefined;
    const handOver = () =>
      (released ??= (async () => {
        await loop.stop();
        await listener.stop();
        await coordinationRelease(deps);
        await replicaStop(ctx.pool, ctx.replicaId);
        // Peers take over on the tick this wakes, not on their own next one.
        await coordinationNotify(ctx.pool, { from: ctx.replicaId });
      })());
    ctx.app.addHook('preClose', async () => {
      await handOver().catch((err) => deps.log.warn({ err: (err as Error).message }, 'could not hand over the coordination leases'));
    });
    ctx.onStop.push(handOver);
  };
}
