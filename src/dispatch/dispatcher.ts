import type { QueueEntry, Waiter } from '../core/entry.js';
import { CAPACITY_RETURNS, planDelivery, type Delivery, type FleetRunner, type PlanOutput, type PoolState } from '../core/plan.js';
import { leaseDeliver, leasesOutstandingByRun, pinsCreate, pinsForRuns, type DeliveredLease, type OfferDetail } from '../store/leases.js';
import { fleetParkedRead, fleetRead, type ParkedRunnerRow } from '../store/fleet.js';
import { withClient, withTransaction, type PoolClient } from '../store/pool.js';
import { poolHoldAcquireMany, poolHoldRelease, poolStateRead } from '../store/pools.js';
import type { PostureField } from '../store/posture.js';
import { queueClaim } from '../store/queue.js';
import { blockUnplaceable } from './blocked.js';
import type { DispatchDeps } from './deps.js';
import { emit as emitDispatch } from '../events.js';
import { offersHeldBy } from './postures.js';
import { handBack } from './lifecycle.js';
import { ackDeadlineMs, toOffer, type Offer } from './offers.js';
import type { QueueSeen } from './queue-seen.js';
import type { ParkedAcquire } from './waiters.js';

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
  held: PostureField | null;
  /** Unplaced claims set aside out of the claim path: nothing but a change elsewhere would place them (dispatch/blocked.ts). */
  blocked: number;
  /** The tick claimed every due entry there was for it (its last claim came back short) and leased each one. */
  tookAll: boolean;
}

/**
 * One dispatch tick: claim due entries of the owned shards, plan them over the parked acquires,
 * and deliver them (tick, below). An entry no parked runner can take is never moved: it keeps
 * its place in the queue.
 */
export async function dispatchOnce(deps: DispatchDeps): Promise<TickResult> {
  const calls = deps.registry.snapshot();
  try {
    return await tick(deps, calls);
  } finally {
    // Calls that joined the tick while it ran were appended to the same list.
    deps.registry.unreserve(calls);
  }
}

/**
 * The acquire calls a tick plans over, one waiter each, and what the tick has planned for their
 * runners on top of what the store showed: slots taken, load added, the scoped run taken up.
 */
class TickWaiters {
  readonly all: Waiter[] = [];
  /** The acquire call each waiter stands for: an offer goes to the very call it was planned on. */
  readonly callOf = new Map<Waiter, ParkedAcquire>();
  /** runner id → the run-scoped run it executes (store) or was just handed (this tick). */
  readonly runnerRuns = new Map<string, number>();
  private readonly plannedLoad = new Map<string, number>();

  constructor(private readonly taken?: Map<ParkedAcquire, number>) {}

  add(calls: ParkedAcquire[], rows: ParkedRunnerRow[]): void {
    const byId = new Map(rows.map((r) => [r.runnerId, r]));
    for (const a of calls) {
      const p = byId.get(a.runner.id);
      if (!p) continue;
      // A runner this tick already planned for carries that load, which the store does not show yet.
      const w: Waiter = {
        runnerId: a.runner.id,
        runnerName: a.runner.name,
        group: p.group,
        labels: p.labels,
        executors: p.executors,
        groupAttributes: p.groupAttributes,
        exclusive: p.exclusive,
        maxLoad: p.maxLoad,
        runningLoad: p.runningLoad + (this.plannedLoad.get(p.runnerId) ?? 0),
        slots: a.slots - (this.taken?.get(a) ?? 0),
        onlyRunId: a.onlyRunId,
        drained: p.drained,
      };
      this.all.push(w);
      this.callOf.set(w, a);
      if (p.scopedRunId !== null && !this.runnerRuns.has(p.runnerId)) this.runnerRuns.set(p.runnerId, p.scopedRunId);
    }
  }

  open(): Waiter[] {
    return this.all.filter((w) => w.slots > 0 && !w.drained);
  }

  /** The plan's waiter is one acquire call: it has one slot fewer, and its runner's load grows on every call it has here. */
  planned(d: Delivery, scoped: boolean): void {
    d.waiter.slots -= 1;
    this.plannedLoad.set(d.waiter.runnerId, (this.plannedLoad.get(d.waiter.runnerId) ?? 0) + d.entry.load);
    for (const w of this.all) if (w.runnerId === d.waiter.runnerId) w.runningLoad += d.entry.load;
    if (scoped) this.runnerRuns.set(d.waiter.runnerId, d.entry.runId);
  }
}

const runnerIdsOf = (calls: ParkedAcquire[]) => [...new Set(calls.map((a) => a.runner.id))];
/** The offers these calls (or waiters) still have room for. */
const slotsOf = (xs: Array<{ slots: number }>) => xs.reduce((n, x) => n + x.slots, 0);

/** Replicas whose last tick found offers held: their next tick reads the posture before it claims. */
const heldLastTick = new WeakSet<DispatchDeps>();
/** Replicas whose last tick claimed entries only a locked claim may take: their next tick locks from the start. */
const lockedLastTick = new WeakSet<DispatchDeps>();

/**
 * Entries a tick must lock from its claim to its delivery: pooled ones (their holds are taken in
 * the delivery's transaction), run-scoped ones (their pins are written there) and those of shards
 * this replica does not own (the cross-shard lanes), which other replicas may claim at the same
 * time. Any other entry is taken by the delivery's own delete, which commits alone.
 */
const needsLock = (e: QueueEntry, owned: ReadonlySet<number>) => e.pools.length > 0 || e.runScope || !owned.has(e.shard);

/** The unlocked attempt met an entry that needs its lock (needsLock): the tick starts again, locked. */
const NEEDS_LOCKS = Symbol('needs locks');

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
async function tick(deps: DispatchDeps, calls: ParkedAcquire[]): Promise<TickResult> {
  const result: TickResult = { waiters: calls.length, claimed: 0, delivered: 0, returned: 0, held: null, blocked: 0, tookAll: false };
  if (calls.length === 0) return result;
  // The posture and the parked runners in one read, on another connection while this one sends
  // the first claim (after BEGIN, when locked): the round trips overlap instead of queueing
  // behind one another. A replica that last found offers held reads the posture alone first, so
  // a held fleet costs that statement only.
  const heldBefore = heldLastTick.has(deps);
  const parkedRead = fleetParkedRead(deps.pool, runnerIdsOf(calls));
  // Awaited below; a failure is answered there, not as an unhandled rejection meanwhile.
  parkedRead.catch(() => {});
  if (heldBefore) {
    const held = offersHeldBy((await parkedRead).posture);
    if (held) {
      result.held = held;
      return result;
    }
    heldLastTick.delete(deps);
  }
  // Without the orchestrator's write riding on the delivery, the steps' start is a statement of
  // its own, which must share the delivery's transaction.
  const unlocked = deps.hooks.stepsStartedWithDelivery !== undefined && !lockedLastTick.has(deps);
  const state: TickState = { result, lockNeeded: false };
  let delivered = unlocked ? await withClient(deps.pool, (client) => planAndDeliver(deps, state, { client, calls, parkedRead, locked: false })) : NEEDS_LOCKS;
  if (delivered === NEEDS_LOCKS) {
    lockedLastTick.add(deps);
    Object.assign(result, { claimed: 0, returned: 0 });
    state.lockNeeded = false;
    delivered = await lockedAttempt(deps, (client) => planAndDeliver(deps, state, { client, calls, parkedRead, locked: true }));
    if (!state.lockNeeded) lockedLastTick.delete(deps);
  } else if (delivered && delivered.lost > 0) {
    // Another dispatcher took entries this one read (a shard changing hands, or its aged lane):
    // the calls' remaining slots are served by a locked claim, which skips what others hold, and
    // ticks lock until one claims nothing that needs it.
    lockedLastTick.add(deps);
    const taken = new Map<ParkedAcquire, number>();
    for (const { call } of delivered.leases) taken.set(call, (taken.get(call) ?? 0) + 1);
    const first = delivered;
    try {
      const rest = await lockedAttempt(deps, (client) => planAndDeliver(deps, state, { client, calls, parkedRead: fleetParkedRead(client, runnerIdsOf(calls)), locked: true, taken }));
      if (rest) delivered = joinPlans(first, rest);
    } catch (err) {
      // What the first delivery committed is answered whatever becomes of the rest: unanswered,
      // those leases would wait out their deadline on runners that never saw them.
      deps.log.warn({ err: (err as Error).message }, 'dispatch: the locked claim after a lost entry failed; answering what was delivered');
    }
  }
  const done = await finish(deps, calls, result, delivered);
  if (delivered && delivered.unplaced.length > 0) {
    // After the answers, and outside the delivery's transaction: setting entries aside only
    // spares later ticks from meeting them again, so a failure here costs nothing but that.
    try {
      result.blocked = await blockUnplaceable(deps.pool, delivered.unplaced, deps.acceptExceeding, deps.recentlyClaimable);
    } catch (err) {
      deps.log.warn({ err: (err as Error).message }, 'dispatch: setting unplaceable entries aside failed; they stay claimable');
    }
  }
  return done;
}

/** planAndDeliver in one transaction, locking what it claims: it never gives up for want of locks. */
async function lockedAttempt(deps: DispatchDeps, attempt: (client: PoolClient) => Promise<Planned | typeof NEEDS_LOCKS>): Promise<Planned> {
  const planned = await withTransaction(deps.pool, attempt);
  if (planned === NEEDS_LOCKS) throw new Error('a locked tick cannot need locks');
  return planned;
}

interface Delivered {
  leases: Array<{ lease: DeliveredLease; call: ParkedAcquire }>;
  details: Map<number, OfferDetail>;
  deliveries: Delivery[];
  lastShort: boolean;
  /** Planned deliveries whose entry was gone when the delivery ran (only an unlocked claim can lose one). */
  lost: number;
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

/** What a tick's attempts share and report through: the tick's result and what its claims met. */
interface TickState {
  result: TickResult;
  /** A claim of this tick held an entry that needs its lock (needsLock). */
  lockNeeded: boolean;
}

/** One attempt of a tick: the calls it plans over, on one client, locking its claims or not. */
interface Attempt {
  client: PoolClient;
  calls: ParkedAcquire[];
  /** The posture and the parked runners, read beside the attempt's first claim. */
  parkedRead: ReturnType<typeof fleetParkedRead>;
  /** Claims lock their entries (the client is in a transaction) or only read them. */
  locked: boolean;
  /** Offers the calls already received in this tick: their slots are that many fewer. */
  taken?: Map<ParkedAcquire, number>;
}

/**
 * Claims, plans and delivers on the attempt's client: inside a transaction when `locked`, each
 * statement on its own otherwise. Unlocked, it gives up (NEEDS_LOCKS) before writing anything as
 * soon as a claim holds an entry that needs its lock.
 */
async function planAndDeliver(deps: DispatchDeps, state: TickState, { client, calls, parkedRead, locked, taken }: Attempt): Promise<Planned | typeof NEEDS_LOCKS> {
  const { result } = state;
  const waiters = new TickWaiters(taken);
  const shards = deps.ownedShards();
  const owned = new Set(shards);
  const lanes = deps.claimLanes?.();
  // Locked, a tick whose claims all turn out not to need it lets the next one go without.
  const claim = async (limit: number, after?: { lane: number; position: number }) => {
    const claims = await queueClaim(client, { shards, ...lanes, limit, after, lock: locked });
    if (claims.some((c) => needsLock(c, owned))) state.lockNeeded = true;
    return claims;
  };
  // The first claim asks for every slot the calls hold: a call of a drained runner, or a runner
  // with no room left, leaves what it would have taken unplaced, in place.
  const firstLimit = Math.min(slotsOf(calls) - [...(taken?.values() ?? [])].reduce((n, k) => n + k, 0), MAX_CLAIMED);
  const [parked, firstClaims] = await Promise.all([parkedRead, claim(firstLimit)]);
  const held = offersHeldBy(parked.posture);
  if (held) {
    // Claimed entries are at most locked: the commit leaves them where they were.
    heldLastTick.add(deps);
    result.held = held;
    return null;
  }
  if (!locked && state.lockNeeded) return NEEDS_LOCKS;
  waiters.add(calls, parked.runners);
  // No call here can take anything: what the first claim found stays where it was.
  if (waiters.open().length === 0) return null;
  let deliveries: Delivery[] = [];
  let after: { lane: number; position: number } | undefined;
  // Claims no waiter could take yet (still locked by this transaction, when it locks): planned
  // again with the next page (a call that joined may take them), and left in place.
  let unplaced: QueueEntry[] = [];
  let why: PlanOutput['returned'] = [];
  // What the store showed for the runs and pools of this tick's claims, read once each, and what
  // earlier pages planned on top: the next page's plan counts both, so a pin binds its siblings
  // and no cap or pool limit is overrun.
  const fair = deps.fair.clone();
  const storePins = new Map<number, string>();
  const storeOut = new Map<number, number>();
  const runsRead = new Set<number>();
  const storePools: PoolState = new Map();
  const poolsRead = new Set<string>();
  const tickPins = new Map<number, string>();
  const tickOut = new Map<number, number>();
  const tickHolds = new Map<string, number>();
  let fleet: FleetRunner[] | undefined;
  // Whether the last claim sent came back with fewer entries than it asked for.
  let lastShort = false;
  for (let page = 0; page < MAX_PAGES && result.claimed < MAX_CLAIMED; page++) {
    let joined = false;
    const openSlots = () => slotsOf(waiters.open());
    // Only calls this tick can still serve in full join it: a call answered after one tick
    // (it carried completions) must not be answered short for want of claim budget. The first
    // page's claim was sent with the tick's start: calls that parked since join the next one.
    const more = page === 0 ? [] : deps.registry.joiners(MAX_CLAIMED - result.claimed - openSlots());
    if (more.length > 0) {
      calls.push(...more);
      const late = await fleetParkedRead(client, runnerIdsOf(more));
      // A posture pulled since the tick began keeps the late calls out; what was planned stands.
      if (!offersHeldBy(late.posture)) {
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
    // Only run-scoped runs are ever pinned or capped (the scope is frozen on every entry of the
    // run): a tick with no run-scoped claim reads neither.
    const newRuns = [...new Set(batch.filter((c) => c.runScope && !runsRead.has(c.runId)).map((c) => c.runId))];
    if (newRuns.length > 0) {
      for (const [run, runner] of await pinsForRuns(client, newRuns)) storePins.set(run, runner);
      for (const [run, n] of await leasesOutstandingByRun(client, newRuns)) storeOut.set(run, n);
      for (const run of newRuns) runsRead.add(run);
    }
    const newPools = [...new Set(batch.flatMap((c) => c.pools))].filter((name) => !poolsRead.has(name));
    if (newPools.length > 0) {
      for (const [name, p] of await poolStateRead(client, newPools)) storePools.set(name, p);
      for (const name of newPools) poolsRead.add(name);
    }
    const pins = new Map([...storePins, ...tickPins]);
    const outstanding = new Map(storeOut);
    for (const [run, n] of tickOut) outstanding.set(run, (outstanding.get(run) ?? 0) + n);
    const pools: PoolState = new Map([...storePools].map(([name, p]) => [name, { limit: p.limit, held: p.held + (tickHolds.get(name) ?? 0) }]));
    // "Exceeds every max_load" is judged against the whole fleet, read only when a claim is
    // larger than some parked runner could ever take.
    const smallest = Math.min(...open.map((w) => w.maxLoad));
    if (!fleet && batch.some((c) => c.load > smallest)) fleet = (await fleetRead(client)).filter((r) => !r.drained);
    const plan = planDelivery({ claims: batch, waiters: open, pools, pins, outstandingByRun: outstanding, acceptExceeding: deps.acceptExceeding, fairShare: fair, fleet, runnerRuns: waiters.runnerRuns });
    unplaced = plan.returned.map((r) => r.entry);
    why = plan.returned;
    for (const d of plan.deliveries) {
      deliveries.push(d);
      fair.charge(d.entry.lane, d.entry.fairKey, d.entry.weight);
      if (d.pin) tickPins.set(d.entry.runId, d.waiter.runnerId);
      const scoped = d.entry.runScope || pins.has(d.entry.runId);
      if (scoped) tickOut.set(d.entry.runId, (tickOut.get(d.entry.runId) ?? 0) + 1);
      for (const name of d.entry.pools) tickHolds.set(name, (tickHolds.get(name) ?? 0) + 1);
      waiters.planned(d, scoped);
    }
    if (claims.length < limit) break;
    const last: QueueEntry = claims[claims.length - 1];
    after = { lane: last.lane, position: last.position };
  }
  result.returned = unplaced.length;
  const blockable = why.filter((r) => !CAPACITY_RETURNS.has(r.code)).map((r) => r.entry);
  if (deliveries.length === 0) return { leases: [], details: new Map<number, OfferDetail>(), deliveries, lastShort, lost: 0, unplaced: blockable };
  // Pool holds, all or none per step, limit rows locked in name order; a step another replica
  // filled the pool ahead of stays queued (its claim is simply not delivered).
  const granted = await poolHoldAcquireMany(client, deliveries.filter((d) => d.entry.pools.length > 0).map((d) => ({ stepId: d.entry.stepId, attempt: d.entry.attempt, pools: d.entry.pools })));
  deliveries = deliveries.filter((d) => d.entry.pools.length === 0 || granted.has(d.entry.stepId));
  // Pins are written before the deliveries, in this transaction, for every run this tick pinned
  // that still has a delivery. A run another replica pinned meanwhile (aged any-shard claims)
  // keeps that pin: deliveries here that disagree with it are dropped.
  const pinRuns = [...new Set(deliveries.filter((d) => tickPins.has(d.entry.runId)).map((d) => d.entry.runId))];
  if (pinRuns.length > 0) {
    await pinsCreate(client, pinRuns.map((runId) => ({ runId, runnerId: tickPins.get(runId)! })));
    const actual = await pinsForRuns(client, pinRuns);
    const dropped = deliveries.filter((d) => actual.has(d.entry.runId) && actual.get(d.entry.runId) !== d.waiter.runnerId);
    if (dropped.length > 0) {
      await poolHoldRelease(client, dropped.map((d) => d.entry.stepId));
      deliveries = deliveries.filter((d) => !dropped.includes(d));
    }
  }
  // Each offer goes to the acquire call it was planned on (its slots and its only_run_id held).
  const callOf = new Map<number, ParkedAcquire>();
  for (const d of deliveries) callOf.set(d.entry.stepId, waiters.callOf.get(d.waiter)!);
  const items = deliveries.map((d) => {
    const call = callOf.get(d.entry.stepId)!;
    return { stepId: d.entry.stepId, runnerId: d.waiter.runnerId, requestId: call.requestId, acked: call.ackOnDelivery ?? false };
  });
  const along = deps.hooks.stepsStartedWithDelivery;
  const offers = await leaseDeliver(client, { holder: deps.replicaId, ttlMs: deps.ttlMs, ackMs: ackDeadlineMs(deps.ttlMs), items, along });
  const leases = offers.map((o) => o.lease);
  // A planned delivery that did not become a lease stays queued: it must not keep a pool hold.
  const leased = new Set(leases.map((l) => l.stepId));
  const unheld = deliveries.filter((d) => d.entry.pools.length > 0 && !leased.has(d.entry.stepId)).map((d) => d.entry.stepId);
  if (unheld.length > 0) await poolHoldRelease(client, unheld);
  if (!along) await deps.hooks.stepsStarted(client, leases.map((l) => ({ stepId: l.stepId, attempt: l.attempt, runnerId: l.runnerId })));
  const details = new Map<number, OfferDetail>();
  for (const o of offers) if (o.detail) details.set(o.lease.stepId, o.detail);
  return { leases: leases.map((lease) => ({ lease, call: callOf.get(lease.stepId)! })), details, deliveries, lastShort, lost: deliveries.length - leases.length, unplaced: blockable };
}

/** What a tick that delivered does once its delivery has committed: fair share, events, the answers. */
async function finish(deps: DispatchDeps, calls: ParkedAcquire[], result: TickResult, delivered: Planned): Promise<TickResult> {
  if (!delivered) return result;
  result.waiters = calls.length;
  result.delivered = delivered.leases.length;
  result.tookAll = delivered.lastShort && result.returned === 0 && result.delivered === result.claimed;
  // Fair-share advances only for deliveries that committed.
  const committed = new Map(delivered.leases.map((l) => [l.lease.stepId, l.lease.deliveredAt]));
  const waits: Array<{ lane: QueueEntry['lane']; seconds: number }> = [];
  for (const d of delivered.deliveries) {
    const at = committed.get(d.entry.stepId);
    if (!at) continue;
    // Both ends are the database's clock: ready_at when it became due, delivered_at at commit.
    waits.push({ lane: d.entry.lane, seconds: Math.max(0, (at.getTime() - d.entry.readyAt.getTime()) / 1000) });
    deps.fair.charge(d.entry.lane, d.entry.fairKey, d.entry.weight);
    if (d.exceedsMaxLoad) {
      deps.log.warn(
        { stepId: d.entry.stepId, runId: d.entry.runId, load: d.entry.load, runner: d.waiter.runnerName, maxLoad: d.waiter.maxLoad },
        'step load exceeds every matching runner\'s max_load: accepted by the most capable runner while idle (accept_exceeding)',
      );
    }
  }
  if (waits.length > 0) emitDispatch(deps.events, 'dispatch:delivered', { waits });
  if (delivered.leases.length > 0) await answer(deps, delivered.leases, delivered.details);
  deps.events.emit('dispatch:tick', result);
  return result;
}

/** Hands committed leases to their parked calls; a call that went away meanwhile gets them handed back. */
async function answer(deps: DispatchDeps, delivered: Array<{ lease: DeliveredLease; call: ParkedAcquire }>, details: Map<number, OfferDetail>): Promise<void> {
  const perCall = new Map<ParkedAcquire, { offers: Offer[]; leases: DeliveredLease[] }>();
  for (const { lease, call } of delivered) {
    let mine = perCall.get(call);
    if (!mine) perCall.set(call, (mine = { offers: [], leases: [] }));
    mine.offers.push(toOffer(lease, details.get(lease.stepId), deps.ttlMs, deps.defaultStepTimeoutMs));
    mine.leases.push(lease);
  }
  const orphaned: DeliveredLease[] = [];
  for (const [call, { offers, leases }] of perCall) {
    if (call.deliver(offers)) deps.events.emit('lease:delivered', { runnerId: call.runner.id, offers: offers.length });
    else orphaned.push(...leases);
  }
  if (orphaned.length > 0) await handBack(deps, orphaned, 'acquire call ended before the offer was sent');
}

/**
 * One pass of the dispatch loop: a tick, or none (null) while the last claim saw nothing due for
 * this replica and nothing since says otherwise (QueueSeen).
 */
export async function dispatchPass(deps: DispatchDeps, seen: QueueSeen): Promise<TickResult | null> {
  const key = JSON.stringify([deps.ownedShards(), deps.claimLanes?.() ?? null]);
  if (seen.knownEmpty(key)) {
    // A call that carried completions waits for one tick, not for the queue to fill.
    deps.registry.answerOneTick();
    return null;
  }
  const mark = seen.mark();
  const result = await dispatchOnce(deps);
  if (result.tookAll) seen.sawEmpty(mark, key);
  return result;
}

/**
 * Busy ticks poll fast; idle ones, and passes that skipped the tick (null), back off to the idle
 * cadence. In-process kicks cut any wait short.
 */
export function nextPollMs(last: TickResult | null, previousWaitMs: number): number {
  if (last && (last.delivered > 0 || last.claimed > 0)) return POLL_BUSY_MS;
  return Math.min(POLL_IDLE_MS, Math.max(POLL_BUSY_MS, previousWaitMs * 2));
}
