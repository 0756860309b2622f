import type { Sampler } from '../core/trace-ids.js';
import type { QueueEntry } from '../core/entry.js';
import { CAPACITY_RETURNS, planDelivery, type FleetRunner, type PlanOutput } from '../core/plan.js';
import { FairShare } from '../core/stride.js';
import type { Logger } from '../logger.js';
import type { OrchestratorHooks } from '../orchestrator/contract.js';
import { fleetParkedRead, fleetRead } from '../store/fleet.js';
import type { DeliveredLease, OfferDetail } from '../store/leases.js';
import { withClient, withTransaction, type Pool, type PoolClient } from '../store/pool.js';
import type { PostureField } from '../store/posture.js';
import { leverNoticeOf } from '../store/lever-notices.js';
import { freedKeyOf, queueClaim, type ClaimParams } from '../store/queue.js';
import type { EventEmitter } from 'node:events';
import { blockUnplaceable, type RecentlyClaimable } from './blocked.js';
import { commitDeliveries, type CommittedDeliveries } from './commit-deliveries.js';
import type { DispatchDeps, DispatcherOptions } from './deps.js';
import { emit as emitDispatch } from '../events.js';
import { LeaseGroupCommit } from './group-commit.js';
import { LeverNotices } from './lever-notices.js';
import { FreedHandOff, type QueueSighting } from './hand-off.js';
import { handBack } from './lifecycle.js';
import { toOffer, type Offer } from './offers.js';
import { offersStoppedBy } from './postures.js';
import { QueueSeen } from './queue-seen.js';
import { TickLedger } from './tick-ledger.js';
import { placementKey, UnplaceableSeen, type UnplacedSighting } from './unplaceable-seen.js';
import { runnerIdsOf, slotsOf, TickWaiters } from './tick-waiters.js';
import { WaiterRegistry, type ParkedAcquire } from './waiters.js';

export const CLAIM_BATCH = 64;
/** Claim statements one tick may issue: more pages when the head cannot be placed, or calls joined. */
const MAX_PAGES = 4;
/** Entries one tick may claim in all; each claim asks for as many as the calls have open slots. */
const MAX_CLAIMED = CLAIM_BATCH * MAX_PAGES;
export const POLL_BUSY_MS = 250;
export const POLL_IDLE_MS = 2_000;

export interface TickResult {
  waiters: number;
  claimed: number;
  delivered: number;
  returned: number;
  /** The posture that stopped offers this tick (the most severe in force), null when they flowed. */
  stoppedBy: PostureField | null;
  /** Unplaced claims set aside out of the claim path: nothing but a change elsewhere would place them (dispatch/blocked.ts). */
  blocked: number;
  /** The tick claimed every due entry there was for it (its last claim came back short) and leased each one. */
  tookAll: boolean;
}

/**
 * Entries a tick must lock from its claim to its delivery: pooled ones (their holds are taken in
 * the delivery's transaction), run-scoped ones (their pins are written there) and those of shards
 * this replica does not own (the cross-shard lanes), which other replicas may claim at the same
 * time. Any other entry is taken by the delivery's own delete, which commits alone.
 */
const needsLock = (e: QueueEntry, owned: ReadonlySet<number>) => e.pools.length > 0 || e.runScope || !owned.has(e.shard);

/** The unlocked attempt met an entry that needs its lock (needsLock): the tick starts again, locked. */
const NEEDS_LOCKS = Symbol('needs locks');

interface Delivered extends CommittedDeliveries {
  lastShort: boolean;
  /** Claims left unplaced for a reason other than every parked match being busy by load: candidates to set aside. */
  unplaced: QueueEntry[];
}
type Planned = Delivered | null;

const joinPlans = (a: Delivered, b: Delivered): Delivered => ({
  leases: [...a.leases, ...b.leases],
  details: new Map([...a.details, ...b.details]),
  deliveries: [...a.deliveries, ...b.deliveries],
  lastShort: b.lastShort,
  lost: a.lost + b.lost,
  unplaced: b.unplaced,
});

/** An attempt's plan, before anything is written. */
interface TickPlan {
  ledger: TickLedger;
  waiters: TickWaiters;
  /** The last claim sent came back with fewer entries than it asked for. */
  lastShort: boolean;
  /** Claims left unplaced for a reason other than capacity: candidates to set aside. */
  unplaced: QueueEntry[];
}

/** The tick's plan found no call that could take anything (every one drained or full): it learnt nothing of its claims. */
const NONE_OPEN = Symbol('no open call');

/** What a tick tells the memory of unplaced work (UnplaceableSeen): what its last plan left unplaced, and whom it planned over. */
interface TickSighting {
  sighting?: UnplacedSighting | typeof NONE_OPEN;
  /** The tick is over calls that parked since the sighting: only such calls join it. */
  arrivalsOnly: boolean;
}

/** What a tick's attempts share and report through: the tick's result and what its claims met. */
interface TickState {
  result: TickResult;
  /** A claim of this tick held an entry that needs its lock (needsLock). */
  lockNeeded: boolean;
  seen: TickSighting;
}

/** One attempt of a tick: the calls it plans over, on one client, locking its claims or not. */
interface Attempt {
  client: PoolClient;
  calls: ParkedAcquire[];
  /** The posture and the parked runners, read beside the attempt's first claim. */
  parkedRead: ReturnType<typeof fleetParkedRead>;
  /** Claims lock their entries (the client is in a transaction) or only read them. */
  locked: boolean;
  /** parkedRead read the posture alone: the parked runners are read once a claim finds work. */
  lean?: boolean;
  /** Offers the calls already received in this tick: their slots are that many fewer. */
  taken?: Map<ParkedAcquire, number>;
}

/**
 * The dispatcher of one replica: its parked acquires, its stride fair-share state, what its last
 * claim saw of the queue (QueueSeen), how its last tick went (offers stopped, locks needed) and its
 * group commit of lease writes. Everything that lives as long as the replica's dispatch loop
 * lives here; the lease lifecycle and the acquire path take it as their DispatchDeps.
 */
export class Dispatcher implements DispatchDeps {
  pool: Pool;
  readonly log: Logger;
  readonly replicaId: string;
  readonly hooks: OrchestratorHooks;
  ownedShards: () => number[];
  readonly claimLanes?: () => Pick<ClaimParams, 'site' | 'liveSites' | 'agedAfterMs'>;
  readonly ttlMs: number;
  readonly acceptExceeding: boolean;
  readonly defaultStepTimeoutMs?: number;
  readonly events: EventEmitter;
  readonly leaseVacuumEvery?: number;
  readonly recentlyClaimable?: RecentlyClaimable;
  readonly traceSampler?: Sampler;
  readonly traceLeases?: boolean;
  readonly registry = new WaiterRegistry();
  readonly fair = new FairShare();
  readonly seen: QueueSeen;
  /** What the last tick that placed none of its claims saw: passes skip the tick while it holds. */
  readonly unplaceable: UnplaceableSeen;
  readonly groupCommit: LeaseGroupCommit;
  /** What the postures and drains announced on the queue channel do to the calls parked or idling here. */
  readonly levers: LeverNotices = new LeverNotices(this);
  /** The last tick found offers stopped by a posture: the next reads the posture alone before it claims. */
  private stoppedLastTick = false;
  /** The last tick claimed entries only a locked claim may take: the next locks from the start. */
  private lockedLastTick = false;
  /**
   * The last tick claimed nothing and saw nothing due: the next reads the posture alone beside its
   * claim and the parked runners only if the claim finds work, so runners parking on an idle
   * replica (each arrival kicks a tick) do not have every parked runner read again and again.
   */
  private idleLastTick = false;
  /** When a hand-off last found due entries ahead of what it was to hand out (queueSighting). */
  private aheadSeenAt: number | null = null;
  readonly now: () => number;
  private wake: () => void = () => {};

  constructor(opts: DispatcherOptions) {
    this.pool = opts.pool;
    this.log = opts.log;
    this.replicaId = opts.replicaId;
    this.hooks = opts.hooks;
    this.ownedShards = opts.ownedShards;
    this.claimLanes = opts.claimLanes;
    this.ttlMs = opts.ttlMs;
    this.acceptExceeding = opts.acceptExceeding;
    this.defaultStepTimeoutMs = opts.defaultStepTimeoutMs;
    this.events = opts.events;
    this.leaseVacuumEvery = opts.leaseVacuumEvery;
    this.recentlyClaimable = opts.recentlyClaimable;
    this.traceSampler = opts.traceSampler;
    this.traceLeases = opts.traceLeases;
    this.now = opts.now ?? (() => Date.now());
    this.seen = new QueueSeen(this.now, POLL_BUSY_MS);
    this.unplaceable = new UnplaceableSeen(this.now, POLL_BUSY_MS, POLL_IDLE_MS);
    this.groupCommit = new LeaseGroupCommit(this);
  }

  /** Wake the dispatch loop now (capacity freed, a call parked). */
  readonly kick = (): void => this.wake();

  /** Entries were put back on the queue here: what the last claim saw no longer holds. Wakes the loop. */
  queueChanged = (): void => {
    this.seen.changed();
    this.unplaceable.changed();
    this.wake();
  };

  /**
   * Something that may let a claim no parked call could take be placed: a lease ended here (a
   * run's step done, a runner's load freed), a pool released on any replica. Wakes the loop.
   */
  placementChanged = (): void => {
    this.unplaceable.changed();
    this.wake();
  };

  /**
   * A notice on the queue channel: work queued anywhere, a pool slot freed on any replica, or a
   * posture or drain changed (the calls it holds are answered, those it frees planned for: the
   * levers). Returns the blocking key a release names (`pool:NAME`: entries set aside on it are to
   * be checked), or null.
   */
  queueNotice(payload?: string): string | null {
    const lever = leverNoticeOf(payload);
    if (lever) {
      this.levers.heard(lever);
      return null;
    }
    // The listener connected again: levers announced meanwhile are lost too.
    if (payload === undefined) this.levers.missed();
    const key = freedKeyOf(payload);
    if (key === null) this.queueChanged();
    else this.placementChanged();
    return key;
  }

  /** The loop that runs this dispatcher's passes: kicks wake it. */
  wakeWith(wake: () => void): void {
    this.wake = wake;
  }

  /**
   * One pass of the dispatch loop: a tick, or none (null) while the last claim saw nothing due for
   * this replica and nothing since says otherwise (QueueSeen), or while the last tick placed none
   * of what it claimed and nothing since could change that (UnplaceableSeen). Calls that parked
   * since and could take some of it are planned over alone: their runners are read, not every
   * parked one.
   */
  async pass(): Promise<TickResult | null> {
    const key = this.queueKey();
    if (this.seen.knownEmpty(key)) {
      // A call that carried completions waits for one tick, not for the queue to fill.
      this.registry.answerOneTick();
      return null;
    }
    let arrivals: ParkedAcquire[] | undefined;
    if (this.unplaceable.holds(key)) {
      arrivals = this.registry.arrived().filter((c) => this.unplaceable.matters(c));
      if (arrivals.length === 0) {
        // A tick would have claimed the same entries and answered these calls empty.
        this.registry.answerOneTick();
        return null;
      }
    }
    const mark = this.seen.mark();
    const result = await this.tick(arrivals);
    if (result.tookAll) this.seen.sawEmpty(mark, key);
    if (arrivals && this.unplaceable.holds(key)) this.registry.answerOneTick();
    return result;
  }

  /**
   * One dispatch tick: claim due entries of the owned shards, plan them over the parked acquires,
   * and deliver them. An entry no parked runner can take is never moved: it keeps its place in
   * the queue.
   */
  async tick(arrivals?: ParkedAcquire[]): Promise<TickResult> {
    const calls = arrivals ? this.registry.hold(arrivals) : this.registry.snapshot();
    const mark = this.unplaceable.mark();
    const key = this.queueKey();
    const seen: TickSighting = { arrivalsOnly: arrivals !== undefined };
    try {
      const result = await this.tickOver(calls, seen);
      if (result.waiters > 0) this.idleLastTick = result.tookAll && result.claimed === 0;
      this.noteUnplaced(mark, key, result, seen);
      return result;
    } catch (err) {
      this.idleLastTick = false;
      this.unplaceable.forget();
      // Its delivery may have committed: the callers retry their request ids and find it.
      this.registry.failUnanswered(calls, err);
      throw err;
    } finally {
      // Calls that joined the tick while it ran were appended to the same list.
      this.registry.unreserve(calls);
    }
  }

  /**
   * The tick over `calls` (the calls parked at its start). Until its last claim, calls that park
   * meanwhile join it before its next claim (appended to `calls`): a call that arrives just after
   * a tick began is served by that tick instead of waiting for it and the next one. Each claim is
   * planned in stride order with what earlier claims of the tick charged, so joining changes who
   * is served sooner, not the order work is handed out in.
   *
   * A tick whose claims are all of owned shards, in no pool and not run-scoped reads them without
   * locks and delivers in one statement that commits alone: its delete takes each entry once, and
   * an entry removed meanwhile (cancelled, or taken by a dispatcher that locked it) is simply not
   * leased. That is two statements (claim, delivery) instead of four (BEGIN, claim, delivery,
   * COMMIT), and no row-lock record per entry. Otherwise the tick claims `FOR UPDATE SKIP LOCKED`
   * in the transaction that delivers.
   */
  private async tickOver(calls: ParkedAcquire[], seen: TickSighting): Promise<TickResult> {
    const result: TickResult = { waiters: calls.length, claimed: 0, delivered: 0, returned: 0, stoppedBy: null, blocked: 0, tookAll: false };
    if (calls.length === 0) return result;
    // The posture and the parked runners in one read, on another connection while this one sends
    // the first claim (after BEGIN, when locked): the round trips overlap instead of queueing
    // behind one another. A replica that last found offers stopped reads the posture alone first, so
    // a stopped fleet costs that statement only.
    const lean = this.idleLastTick;
    const parkedRead = fleetParkedRead(this.pool, lean ? [] : runnerIdsOf(calls));
    // Awaited below; a failure is answered there, not as an unhandled rejection meanwhile.
    parkedRead.catch(() => {});
    if (this.stoppedLastTick) {
      const stopped = offersStoppedBy((await parkedRead).posture);
      if (stopped) {
        result.stoppedBy = stopped;
        return result;
      }
      this.stoppedLastTick = false;
    }
    // Without the orchestrator's write riding on the delivery, the steps' start is a statement of
    // its own, which must share the delivery's transaction.
    const unlocked = this.hooks.stepsStartedWithDelivery !== undefined && !this.lockedLastTick;
    const state: TickState = { result, lockNeeded: false, seen };
    let delivered = unlocked ? await withClient(this.pool, (client) => this.attempt(state, { client, calls, parkedRead, locked: false, lean })) : NEEDS_LOCKS;
    if (delivered === NEEDS_LOCKS) {
      this.lockedLastTick = true;
      Object.assign(result, { claimed: 0, returned: 0 });
      state.lockNeeded = false;
      delivered = await this.lockedAttempt((client) => this.attempt(state, { client, calls, parkedRead, locked: true, lean }));
      if (!state.lockNeeded) this.lockedLastTick = false;
    } else if (delivered && delivered.lost > 0) {
      // Another dispatcher took entries this one read (a shard changing hands, or its aged lane):
      // the calls' remaining slots are served by a locked claim, which skips what others hold, and
      // ticks lock until one claims nothing that needs it.
      this.lockedLastTick = true;
      const taken = new Map<ParkedAcquire, number>();
      for (const { call } of delivered.leases) taken.set(call, (taken.get(call) ?? 0) + 1);
      const first = delivered;
      try {
        const rest = await this.lockedAttempt((client) => this.attempt(state, { client, calls, parkedRead: fleetParkedRead(client, runnerIdsOf(calls)), locked: true, taken }));
        if (rest) delivered = joinPlans(first, rest);
      } catch (err) {
        // What the first delivery committed is answered whatever becomes of the rest: unanswered,
        // those leases would wait out their deadline on runners that never saw them.
        this.log.warn({ err: (err as Error).message }, 'dispatch: the locked claim after a lost entry failed; answering what was delivered');
      }
    }
    const done = await this.finish(calls, result, delivered);
    if (delivered && delivered.unplaced.length > 0) {
      // After the answers, and outside the delivery's transaction: setting entries aside only
      // spares later ticks from meeting them again, so a failure here costs nothing but that.
      try {
        result.blocked = await blockUnplaceable(this.pool, delivered.unplaced, this.acceptExceeding, this.recentlyClaimable);
      } catch (err) {
        this.log.warn({ err: (err as Error).message }, 'dispatch: setting unplaceable entries aside failed; they stay claimable');
      }
    }
    return done;
  }

  /** An attempt in one transaction, locking what it claims: it never gives up for want of locks. */
  private async lockedAttempt(attempt: (client: PoolClient) => Promise<Planned | typeof NEEDS_LOCKS>): Promise<Planned> {
    const planned = await withTransaction(this.pool, attempt);
    if (planned === NEEDS_LOCKS) throw new Error('a locked tick cannot need locks');
    return planned;
  }

  /**
   * One attempt of a tick: its plan (a tick ledger), then the ledger's deliveries committed
   * (commitDeliveries) on the attempt's client: inside a transaction when `locked`, each statement
   * on its own otherwise. Unlocked, it gives up (NEEDS_LOCKS) before writing anything as soon as
   * a claim holds an entry that needs its lock.
   */
  private async attempt(state: TickState, attempt: Attempt): Promise<Planned | typeof NEEDS_LOCKS> {
    const planned = await this.plan(state, attempt);
    if (planned === null || planned === NEEDS_LOCKS) return planned;
    const { ledger, waiters, lastShort, unplaced } = planned;
    if (ledger.deliveries.length === 0) return { leases: [], details: new Map<number, OfferDetail>(), deliveries: [], lastShort, lost: 0, unplaced };
    const committed = await commitDeliveries(attempt.client, this, { deliveries: ledger.deliveries, pinned: ledger.pinned, callOf: waiters.callOf });
    return { ...committed, lastShort, unplaced };
  }

  /**
   * Claims page by page and plans each page over the calls into a tick ledger; writes nothing.
   * Null: offers are stopped by a posture, or no call can take anything (what was claimed stays where it was).
   */
  private async plan(state: TickState, { client, calls, parkedRead, locked, taken, lean }: Attempt): Promise<TickPlan | null | typeof NEEDS_LOCKS> {
    const { result } = state;
    const waiters = new TickWaiters(taken);
    const shards = this.ownedShards();
    const owned = new Set(shards);
    const lanes = this.claimLanes?.();
    // Locked, a tick whose claims all turn out not to need it lets the next one go without.
    const claim = async (limit: number, after?: { lane: number; position: number }) => {
      const claims = await queueClaim(client, { shards, ...lanes, limit, after, lock: locked });
      if (claims.some((c) => needsLock(c, owned))) state.lockNeeded = true;
      return claims;
    };
    // The first claim asks for every slot the calls hold: a call of a drained runner, or a runner
    // with no room left, leaves what it would have taken unplaced, in place.
    const firstLimit = Math.min(slotsOf(calls) - [...(taken?.values() ?? [])].reduce((n, k) => n + k, 0), MAX_CLAIMED);
    const [atStart, firstClaims] = await Promise.all([parkedRead, claim(firstLimit)]);
    const stopped = offersStoppedBy(atStart.posture);
    if (stopped) {
      // Claimed entries are at most locked: the commit leaves them where they were.
      this.stoppedLastTick = true;
      result.stoppedBy = stopped;
      return null;
    }
    if (!locked && state.lockNeeded) return NEEDS_LOCKS;
    if (lean && firstClaims.length === 0) {
      // Nothing due, as last time: the same empty outcome a full read would have planned to.
      return { ledger: new TickLedger(this.fair), waiters, lastShort: true, unplaced: [] };
    }
    const parked = lean ? await fleetParkedRead(client, runnerIdsOf(calls)) : atStart;
    waiters.add(calls, parked.runners);
    // No call here can take anything: what the first claim found stays where it was.
    if (waiters.open().length === 0) {
      state.seen.sighting = NONE_OPEN;
      return null;
    }
    let after: { lane: number; position: number } | undefined;
    // Claims no waiter could take yet (still locked by this transaction, when it locks): planned
    // again with the next page (a call that joined may take them), and left in place.
    let unplaced: QueueEntry[] = [];
    let why: PlanOutput['returned'] = [];
    const ledger = new TickLedger(this.fair);
    let fleet: FleetRunner[] | undefined;
    // Whether the last claim sent came back with fewer entries than it asked for.
    let lastShort = false;
    for (let page = 0; page < MAX_PAGES && result.claimed < MAX_CLAIMED; page++) {
      let joined = false;
      const openSlots = () => slotsOf(waiters.open());
      // Only calls this tick can still serve in full join it: a call answered after one tick
      // (it carried completions) must not be answered short for want of claim budget. The first
      // page's claim was sent with the tick's start: calls that parked since join the next one.
      const more = page === 0 ? [] : this.registry.joiners(MAX_CLAIMED - result.claimed - openSlots(), state.seen.arrivalsOnly);
      if (more.length > 0) {
        calls.push(...more);
        const late = await fleetParkedRead(client, runnerIdsOf(more));
        // A posture pulled since the tick began keeps the late calls out; what was planned stands.
        if (!offersStoppedBy(late.posture)) {
          waiters.add(more, late.runners);
          joined = true;
        }
      }
      const open = waiters.open();
      const slots = slotsOf(open);
      if (slots === 0) break;
      // Later pages read a whole batch: a head of entries no parked call can take (each is set
      // aside once the tick ends) must not keep the tick from reaching what lies behind it.
      const limit = page === 0 ? firstLimit : Math.min(Math.max(slots, CLAIM_BATCH), MAX_CLAIMED - result.claimed);
      const claims = page === 0 ? firstClaims : await claim(limit, after);
      if (!locked && state.lockNeeded) return NEEDS_LOCKS;
      result.claimed += claims.length;
      lastShort = claims.length < limit;
      if (claims.length === 0 && !(joined && unplaced.length > 0)) break;
      const batch = [...unplaced, ...claims];
      await ledger.read(client, batch);
      const view = ledger.planInput();
      // "Exceeds every max_load" is judged against the whole fleet, read only when a claim is
      // larger than some parked runner could ever take.
      const smallest = Math.min(...open.map((w) => w.maxLoad));
      if (!fleet && batch.some((c) => c.load > smallest)) fleet = (await fleetRead(client)).filter((r) => !r.drained);
      const plan = planDelivery({ claims: batch, waiters: open, ...view, acceptExceeding: this.acceptExceeding, fairShare: ledger.fair, fleet, runnerRuns: waiters.runnerRuns });
      unplaced = plan.returned.map((r) => r.entry);
      why = plan.returned;
      for (const d of plan.deliveries) waiters.planned(d, ledger.record(d, view));
      if (claims.length < limit) break;
      const last: QueueEntry = claims[claims.length - 1];
      after = { lane: last.lane, position: last.position };
    }
    result.returned = unplaced.length;
    const blockable = why.filter((r) => !CAPACITY_RETURNS.has(r.code)).map((r) => r.entry);
    // A runner executing a run-scoped run takes that run's work alone: its call says nothing of
    // what a call placed like it could take.
    const free = waiters.open().filter((w) => !waiters.runnerRuns.has(w.runnerId));
    state.seen.sighting = { stepIds: why.map((r) => r.entry.stepId), codes: why.map((r) => r.code), placements: free.map(placementKey) };
    return { ledger, waiters, lastShort, unplaced: blockable };
  }

  /**
   * What the memory of unplaced work learns from a tick: a tick over every parked call that claimed
   * entries and left each in place (none delivered, none set aside) is a sighting; a tick over
   * calls that parked since extends it when it met only entries the sighting holds; anything
   * else drops it.
   */
  private noteUnplaced(mark: number, key: string, result: TickResult, seen: TickSighting): void {
    const { sighting } = seen;
    const placedNone = result.stoppedBy === null && result.delivered === 0 && result.blocked === 0 && result.claimed > 0 && result.returned === result.claimed;
    if (seen.arrivalsOnly) {
      // Calls that can take nothing at all (drained, full) change nothing of what was seen.
      if (sighting === NONE_OPEN && result.stoppedBy === null) return;
      this.unplaceable.extend(mark, placedNone && sighting !== undefined && sighting !== NONE_OPEN ? sighting : null);
      return;
    }
    if (placedNone && sighting !== undefined && sighting !== NONE_OPEN) this.unplaceable.saw(mark, key, sighting);
    else this.unplaceable.forget();
  }

  /** What a tick that delivered does once its delivery has committed: fair share, events, the answers. */
  private async finish(calls: ParkedAcquire[], result: TickResult, delivered: Planned): Promise<TickResult> {
    if (!delivered) return result;
    result.waiters = calls.length;
    result.delivered = delivered.leases.length;
    result.tookAll = delivered.lastShort && result.returned === 0 && result.delivered === result.claimed;
    await this.answerDelivered(delivered);
    emitDispatch(this.events, 'dispatch:tick', result);
    return result;
  }

  /**
   * Deliveries that committed (a tick's, or a hand-off's of freed steps): fair share charged for
   * them alone, their waits and warnings reported, their calls answered.
   */
  async answerDelivered(delivered: CommittedDeliveries): Promise<void> {
    const committed = new Map(delivered.leases.map((l) => [l.lease.stepId, l.lease.deliveredAt]));
    const waits: Array<{ lane: QueueEntry['lane']; seconds: number }> = [];
    for (const d of delivered.deliveries) {
      const at = committed.get(d.entry.stepId);
      if (!at) continue;
      // Both ends are the database's clock: ready_at when it became due, delivered_at at commit.
      waits.push({ lane: d.entry.lane, seconds: Math.max(0, (at.getTime() - d.entry.readyAt.getTime()) / 1000) });
      this.fair.charge(d.entry.lane, d.entry.fairKey, d.entry.weight);
      if (d.exceedsMaxLoad) {
        this.log.warn(
          { stepId: d.entry.stepId, runId: d.entry.runId, load: d.entry.load, runner: d.waiter.runnerName, maxLoad: d.waiter.maxLoad },
          'step load exceeds every matching runner\'s max_load: accepted by the most capable runner while idle (accept_exceeding)',
        );
      }
    }
    if (waits.length > 0) emitDispatch(this.events, 'dispatch:delivered', { waits });
    if (delivered.leases.length > 0) await this.answer(delivered.leases, delivered.details);
  }

  /** A hand-off of the steps the next group of completions frees, to the calls carrying them and this replica's parked calls. */
  handOff = (carriers: ParkedAcquire[] = []): FreedHandOff => new FreedHandOff(this, carriers);

  /**
   * What this replica knows of the queue it claims from: nothing due (QueueSeen) with offers
   * flowing in the last tick; a backlog, which a hand-off found ahead of the steps it was to hand
   * out less than a busy poll ago; or nothing certain.
   */
  queueSighting(): QueueSighting {
    if (!this.stoppedLastTick && this.seen.knownEmpty(this.queueKey())) return 'empty';
    return this.aheadSeenAt !== null && this.now() - this.aheadSeenAt < POLL_BUSY_MS ? 'backlog' : 'unknown';
  }

  /** A hand-off found due entries ahead of the steps it was to hand out. */
  sawAhead(): void {
    this.aheadSeenAt = this.now();
  }

  private queueKey(): string {
    return JSON.stringify([this.ownedShards(), this.claimLanes?.() ?? null]);
  }

  /** Hands committed leases to their parked calls; a call that went away meanwhile gets them handed back. */
  private async answer(delivered: Array<{ lease: DeliveredLease; call: ParkedAcquire }>, details: Map<number, OfferDetail>): Promise<void> {
    const perCall = new Map<ParkedAcquire, { offers: Offer[]; leases: DeliveredLease[] }>();
    for (const { lease, call } of delivered) {
      let mine = perCall.get(call);
      if (!mine) perCall.set(call, (mine = { offers: [], leases: [] }));
      mine.offers.push(toOffer(lease, details.get(lease.stepId), this.ttlMs, this.defaultStepTimeoutMs, this.traceSampler));
      mine.leases.push(lease);
    }
    const orphaned: DeliveredLease[] = [];
    for (const [call, { offers, leases }] of perCall) {
      if (call.deliver(offers)) emitDispatch(this.events, 'lease:delivered', { runnerId: call.runner.id, offers: offers.length });
      else orphaned.push(...leases);
    }
    if (orphaned.length > 0) await handBack(this, orphaned, 'acquire call ended before the offer was sent');
  }
}

/**
 * Busy ticks poll fast; idle ones, and passes that skipped the tick (null), back off to the idle
 * cadence. In-process kicks cut any wait short.
 */
export function nextPollMs(last: TickResult | null, previousWaitMs: number): number {
  if (last && (last.delivered > 0 || last.claimed > 0)) return POLL_BUSY_MS;
  return Math.min(POLL_IDLE_MS, Math.max(POLL_BUSY_MS, previousWaitMs * 2));
}
