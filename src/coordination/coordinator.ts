import type { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import type { Clock } from '../clock.js';
import type { ServerConfig } from '../config.js';
import { shardsOf } from '../core/rendezvous.js';
import type { Logger } from '../logger.js';
import { startLoop } from '../loop.js';
import type { OrchestratorHooks } from '../orchestrator/contract.js';
import type { ReplicaEnv, ReplicaPart } from '../context.js';
import {
  coordinationLeaseAcquire,
  coordinationLeaseList,
  coordinationLeaseRelease,
  coordinationNotify,
  COORDINATION_CHANNEL,
  LEADER_LEASE,
  type CoordinationLease,
  type Member,
  membershipLive,
  replicaReap,
  completedAttemptsPrune,
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
import { LeaderDuties, type LeaderDuty } from './duties.js';
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
  /** The leader lease: valid three ticks, renewed every tick. */
  leaderTtlMs: number;
}

// Defined with the queue's shapes, below both planes; named here too for the readers of coordination.
export { SHARD_FALLBACK_MS } from '../core/entry.js';

export const DEFAULT_TIMING: CoordinationTiming = { tickMs: 5_000, stalenessMs: 15_000, shardTtlMs: 15_000, leaderTtlMs: 15_000 };

/** Reclaim works in bounded batches so one sweep never holds many rows locked at once. */
const RECLAIM_BATCH = 500;
const RECLAIM_MAX_BATCHES = 20;

export interface CoordinationDeps {
  pool: Pool;
  replicaId: string;
  site: string | null;
  clock: Clock;
  log: Logger;
  events: EventEmitter;
  state: CoordinationState;
  timing: CoordinationTiming;
  config: Pick<ServerConfig, 'pollWindowMs' | 'replicaRetentionMs' | 'completedAttemptsRetentionDays'>;
  /** Told when a reclaimed exposed claim comes back as a new attempt. */
  hooks?: Pick<OrchestratorHooks, 'stepRequeued'>;
  /** The leader's duties beyond coordination's own, run after runner liveness (the lost-runner expiry sweep is one). */
  leaderDuties?: LeaderDuty[];
}

const sameList = (a: number[], b: number[]) => a.length === b.length && a.every((v, i) => v === b[i]);

/**
 * The time each duty of one pass judges by, standing for the database's now() (River's
 * `coalesce($now, now())`): a test sets the time of the one duty it examines, so a later time
 * never reaches the duties that keep the replica running the test alive. Absent: the database clock.
 */
export interface CoordinationTimes {
  /** The heartbeat written. */
  heartbeat?: Date;
  /** Which replicas count as live. */
  membership?: Date;
  /** Which shard and leader leases are valid, and when those taken or renewed expire. */
  leases?: Date;
  /** Which peers are dead enough for their claims to be taken back. */
  reclaim?: Date;
  /** Which runners have gone silent (leader). */
  liveness?: Date;
  /** Which replica rows are past the retention (leader). */
  reaping?: Date;
  /** Which completed attempts are past the retention (leader). */
  retention?: Date;
}

/** Coordination's own leader duties: runner liveness first, then the others' duties, then reaping and retention. */
function coordinationDuties(deps: CoordinationDeps, at: () => CoordinationTimes) {
  const { pool, log, timing, config } = deps;
  return {
    liveness: {
      name: 'runner liveness',
      fallback: [],
      run: async () => {
        const changes = await runnerLivenessSweep(pool, { pollWindowMs: config.pollWindowMs, graceMs: timing.stalenessMs, now: at().liveness });
        for (const c of changes) log.info({ runner: c.runnerId, from: c.from, to: c.to }, `runner ${c.to === 'offline' ? 'marked offline' : c.to === 'watch' ? 'on the watch list' : 'back online'}`);
        return changes;
      },
    } satisfies LeaderDuty<LivenessChange[]>,
    reaping: {
      name: 'replica reaping',
      fallback: [],
      run: async () => {
        const reaped = await replicaReap(pool, { retentionMs: config.replicaRetentionMs, now: at().reaping });
        if (reaped.length) log.info({ reaped }, 'reaped replica rows past the retention');
        return reaped;
      },
    } satisfies LeaderDuty<string[]>,
    retention: {
      name: 'completed_attempts retention',
      fallback: 0,
      run: () => completedAttemptsPrune(pool, { retentionDays: config.completedAttemptsRetentionDays, now: at().retention }),
    } satisfies LeaderDuty<number>,
  };
}

/**
 * The coordination of one replica, one pass at a time (`once`); each duty of a pass is a function
 * of its own:
 *
 *  1. heartbeat (re-registering if the row vanished);
 *  2. membership: read the live replicas, and whether this one is among them (not quiesced);
 *  3. shards: release the shards no longer ours FIRST (local ownership dropped before the row
 *     goes), then claim the desired shards that are free, expired or already ours, so two
 *     replicas never hold one shard at the same instant;
 *  4. leadership: contend for (or, when quiesced, give up) the leader lease; wake the peers
 *     when something was let go or is wanted;
 *  5. reclaim the un-acked claims of dead peers;
 *  6. on the leader: the leader's duties (LeaderDuties), coordination's own and the others'.
 *
 * Every decision about time is the database's now() (or the time a test set for one duty, see
 * CoordinationTimes); the local clock only bounds how long this replica trusts a lease it was granted.
 */
export class Coordinator {
  private readonly own: ReturnType<typeof coordinationDuties>;
  private readonly duties: LeaderDuties;
  /** The times of the pass under way (its leader duties read them when they run). */
  private at: CoordinationTimes = {};

  constructor(readonly deps: CoordinationDeps) {
    this.own = coordinationDuties(deps, () => this.at);
    this.duties = new LeaderDuties([this.own.liveness, ...(deps.leaderDuties ?? []), this.own.reaping, this.own.retention], deps.log);
  }

  async once(p: { at?: CoordinationTimes } = {}): Promise<TickReport> {
    const { deps, own } = this;
    const at = (this.at = p.at ?? {});
    const tickStart = deps.clock.now();
    const beat = await heartbeat(deps, at.heartbeat);
    const { live, member } = await membership(deps, beat, at.membership);
    const leases = await coordinationLeaseList(deps.pool, { now: at.leases });
    const shards = await shardLeases(deps, { live, member, leases, tickStart, now: at.leases });
    const leadership = await leaderLease(deps, { member, leases, tickStart, now: at.leases });
    // Whatever we let go, peers take on their next tick: wake them so that is now.
    if (shards.released.length > 0 || leadership.gaveUp || shards.wanted) await guarded(deps.log, 'notify', () => coordinationNotify(deps.pool, { from: deps.replicaId }), undefined);
    announceLeadership(deps, leadership.was);
    const leader = deps.state.isLeader();
    const reclaimed = member ? await reclaim(deps, at.reclaim) : [];
    const done = await this.duties.tick({ leaderToken: leader ? deps.state.leaderToken() : undefined, now: deps.clock.now() });
    const report: TickReport = {
      replicaId: deps.replicaId,
      member,
      live,
      owned: shards.owned,
      desired: shards.desired,
      released: shards.released,
      acquired: shards.acquired,
      leader,
      reclaimed,
      liveness: done.of(own.liveness),
      reaped: done.of(own.reaping),
      pruned: done.of(own.retention),
    };
    emitCoordination(deps.events, 'coordination:tick', report);
    return report;
  }
}

/** The heartbeat; a replica whose row was reaped (frozen past the retention) registers again. */
async function heartbeat(deps: CoordinationDeps, now: Date | undefined): Promise<{ quiesced: boolean }> {
  const beat = await replicaHeartbeat(deps.pool, deps.replicaId, { now });
  if (beat) return beat;
  // Our row was reaped while this process was frozen past the retention: come back as a member.
  deps.log.warn({ replica: deps.replicaId }, 'membership row missing; registering again');
  await replicaRegister(deps.pool, { id: deps.replicaId, host: hostname(), site: deps.site ?? undefined, version: VERSION });
  return { quiesced: false };
}

/** The live membership, and whether this replica is in it (not quiesced); announced when that changes. */
async function membership(deps: CoordinationDeps, beat: { quiesced: boolean }, now: Date | undefined): Promise<{ live: Member[]; member: boolean }> {
  const { state, replicaId: me } = deps;
  const live = await membershipLive(deps.pool, { stalenessMs: deps.timing.stalenessMs, now });
  const member = !beat.quiesced && live.some((m) => m.id === me);
  const wasMember = state.inMembership();
  state.setMembership(member, live.flatMap((m) => (m.site ? [m.site] : [])));
  if (wasMember !== member) emitCoordination(deps.events, 'membership:changed', { replicaId: me, member });
  return { live, member };
}

/**
 * The rendezvous shards of this replica: those no longer ours released first, then the desired
 * ones that are free, expired or ours claimed. `wanted`: a live peer holds shards now ours, and
 * that is news (it is woken once, not every tick, and two waiting replicas never wake each other
 * in a loop).
 */
async function shardLeases(
  deps: CoordinationDeps,
  p: { live: Member[]; member: boolean; leases: CoordinationLease[]; tickStart: number; now: Date | undefined },
): Promise<{ desired: number[]; released: number[]; acquired: number[]; owned: number[]; wanted: boolean }> {
  const { pool, replicaId: me, state, timing } = deps;
  const liveIds = p.live.map((m) => m.id);
  const desired = p.member ? shardsOf(me, liveIds) : [];
  const desiredSet = new Set(desired);
  const before = state.owned();
  const byName = new Map(p.leases.map((l) => [l.name, l]));
  const mineInStore = p.leases.flatMap((l) => {
    const s = shardOfLeaseName(l.name);
    return s !== undefined && l.holder === me ? [s] : [];
  });
  const released = [...new Set([...before, ...mineInStore])].filter((s) => !desiredSet.has(s)).sort((a, b) => a - b);
  if (released.length) {
    state.dropShards(released);
    await coordinationLeaseRelease(pool, { names: released.map(shardLeaseName), holder: me });
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
  const blockedKey = blocked.join(',');
  const wanted = blockedKey !== '' && blockedKey !== state.lastAnnouncedWant;
  state.lastAnnouncedWant = blockedKey;
  const granted = await coordinationLeaseAcquire(pool, { names: claimable.map(shardLeaseName), holder: me, ttlMs: timing.shardTtlMs, now: p.now });
  state.setShards(
    granted.map((g) => ({ shard: shardOfLeaseName(g.name)!, token: g.token })),
    p.tickStart + timing.shardTtlMs - OWNERSHIP_SAFETY_MS,
  );
  const owned = state.owned();
  const acquired = owned.filter((s) => !before.includes(s));
  const lost = before.filter((s) => !owned.includes(s));
  if (!sameList(before, owned)) emitCoordination(deps.events, 'shards:changed', { replicaId: me, owned, added: acquired, removed: lost });
  return { desired, released, acquired, owned, wanted };
}

/** Contends for the leader lease as a member; a replica out of the membership gives it up. */
async function leaderLease(deps: CoordinationDeps, p: { member: boolean; leases: CoordinationLease[]; tickStart: number; now: Date | undefined }): Promise<{ was: boolean; gaveUp: boolean }> {
  const { pool, replicaId: me, state, timing } = deps;
  const was = state.isLeader();
  if (p.member) {
    const [lease] = await coordinationLeaseAcquire(pool, { names: [LEADER_LEASE], holder: me, ttlMs: timing.leaderTtlMs, now: p.now });
    state.setLeader(lease?.token, p.tickStart + timing.leaderTtlMs - OWNERSHIP_SAFETY_MS);
    return { was, gaveUp: false };
  }
  state.setLeader(undefined, 0);
  if (p.leases.find((l) => l.name === LEADER_LEASE)?.holder !== me) return { was, gaveUp: false };
  await coordinationLeaseRelease(pool, { names: [LEADER_LEASE], holder: me });
  return { was, gaveUp: true };
}

function announceLeadership(deps: CoordinationDeps, wasLeader: boolean): void {
  const { state, replicaId: me, log, events } = deps;
  const leader = state.isLeader();
  if (leader && !wasLeader) {
    log.info({ replica: me, token: state.leaderToken() }, 'gained the leader lease');
    emitCoordination(events, 'leader:gained', { replicaId: me, token: state.leaderToken()! });
  } else if (!leader && wasLeader) {
    log.info({ replica: me }, 'lost the leader lease');
    emitCoordination(events, 'leader:lost', { replicaId: me });
  }
}

/** The un-acked claims of dead peers, back on the queue (a failure is retried next tick). */
async function reclaim(deps: CoordinationDeps, now: Date | undefined): Promise<ReclaimedClaim[]> {
  const reclaimed = await guarded(deps.log, 'reclaim', () => reclaimDeadPeers(deps, { now }), []);
  if (reclaimed.length) {
    deps.log.info({ reclaimed: reclaimed.length, exposed: reclaimed.filter((r) => r.exposed).length, holders: [...new Set(reclaimed.map((r) => r.holder))] }, 'reclaimed the claims of dead replicas');
    emitCoordination(deps.events, 'queue:enqueued', { stepIds: reclaimed.map((r) => r.stepId), source: 'reclaim' });
  }
  return reclaimed;
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
export async function reclaimDeadPeers(deps: Pick<CoordinationDeps, 'pool' | 'replicaId' | 'timing' | 'hooks'>, opts: { now?: Date } = {}): Promise<ReclaimedClaim[]> {
  const all: ReclaimedClaim[] = [];
  for (let i = 0; i < RECLAIM_MAX_BATCHES; i++) {
    const batch = await withTransaction(deps.pool, async (client) => {
      const got = await claimReclaimDead(client, { me: deps.replicaId, stalenessMs: deps.timing.stalenessMs, limit: RECLAIM_BATCH, now: opts.now });
      for (const r of got) {
        if (r.exposed && deps.hooks) {
          await deps.hooks.stepRequeued(client, { stepId: r.stepId, fromAttempt: r.attempt, toAttempt: r.requeuedAttempt, reason: `replica ${r.holder} lost before the runner acked`, lease: r.lease });
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

export interface CoordinationOptions {
  timing?: Partial<CoordinationTiming>;
  hooks?: Pick<OrchestratorHooks, 'stepRequeued'>;
}

/**
 * The coordination loop of a replica over `state`, the ownership the other parts were built with
 * (it exists before the loop starts, so they can be). Its part hands everything over at the start
 * of a clean shutdown.
 */
export function startCoordination(env: ReplicaEnv, state: CoordinationState, opts: CoordinationOptions & { leaderDuties: LeaderDuty[] }): ReplicaPart {
  const deps: CoordinationDeps = {
    pool: env.pool,
    replicaId: env.replicaId,
    site: env.config.site ?? null,
    clock: env.clock,
    log: env.log.child({ component: 'coordination' }),
    events: env.events,
    state,
    timing: { ...DEFAULT_TIMING, ...opts.timing },
    config: env.config,
    hooks: opts.hooks,
    leaderDuties: opts.leaderDuties,
  };
  const coordinator = new Coordinator(deps);
  const loop = startLoop({
    name: 'coordination',
    clock: env.clock,
    log: deps.log,
    once: async () => {
      await coordinator.once();
      return deps.timing.tickMs;
    },
    errorDelayMs: 1_000,
  });
  // Leases released, wanted, or a replica quiesced anywhere: tick now.
  const listener = listenChannel(env.listenUrl, COORDINATION_CHANNEL, (from) => {
      if (from !== env.replicaId) loop.kick();
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
      await replicaStop(env.pool, env.replicaId);
      // Peers take over on the tick this wakes, not on their own next one.
      await coordinationNotify(env.pool, { from: env.replicaId });
    })());
  return {
    halt: () => loop.stop(),
    beforeClose: async () => {
      await handOver().catch((err) => deps.log.warn({ err: (err as Error).message }, 'could not hand over the coordination leases'));
    },
    stop: handOver,
  };
}
