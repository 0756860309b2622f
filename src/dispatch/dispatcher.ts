import type { QueueEntry, Waiter } from '../core/entry.js';
import { planDelivery, type Delivery, type FleetRunner } from '../core/plan.js';
import { leaseDeliver, leasesOutstandingByRun, offerDetails, pinsCreate, pinsForRuns, type LeaseRow, type OfferDetail } from '../store/leases.js';
import { fleetRead, runnerScopedRuns } from '../store/fleet.js';
import { withTransaction } from '../store/pool.js';
import { poolHoldAcquireMany, poolHoldRelease, poolStateRead } from '../store/pools.js';
import { postureRead, type PostureField } from '../store/posture.js';
import { queueClaim } from '../store/queue.js';
import type { DispatchDeps } from './deps.js';
import { emitDispatch } from './events.js';
import { offersHeldBy } from './postures.js';
import { handBack } from './lifecycle.js';
import { ackDeadlineMs, toOffer, type Offer } from './offers.js';
import type { ParkedAcquire } from './waiters.js';

export const CLAIM_BATCH = 64;
/** Pages of the queue one tick may look through when the head cannot be placed on any parked runner. */
const MAX_PAGES = 4;
export const POLL_BUSY_MS = 250;
export const POLL_IDLE_MS = 2_000;

export interface TickResult { waiters: number; claimed: number; delivered: number; returned: number; held: PostureField | null }

/**
 * One dispatch tick: claim due entries of the owned shards, plan them over the acquires parked
 * at the tick's start, and deliver in the same transaction that locked them. An entry no
 * parked runner can take is never moved: it keeps its place in the queue.
 */
export async function dispatchOnce(deps: DispatchDeps): Promise<TickResult> {
  const parked = deps.registry.snapshot();
  try {
    return await tick(deps, parked);
  } finally {
    deps.registry.unreserve(parked);
  }
}

async function tick(deps: DispatchDeps, parked: ParkedAcquire[]): Promise<TickResult> {
  const result: TickResult = { waiters: parked.length, claimed: 0, delivered: 0, returned: 0, held: null };
  if (parked.length === 0) return result;
  const posture = await postureRead(deps.pool);
  const held = offersHeldBy(posture);
  if (held) {
    result.held = held;
    return result;
  }
  const parkedRunners = await fleetRead(deps.pool, { runnerIds: [...new Set(parked.map((a) => a.runner.id))] });
  const postures = new Map(parkedRunners.map((r) => [r.runnerId, r]));
  const waiters: Waiter[] = [];
  /** The acquire call each waiter stands for: an offer goes to the very call it was planned on. */
  const callOfWaiter = new Map<Waiter, ParkedAcquire>();
  for (const a of parked) {
    const p = postures.get(a.runner.id);
    if (!p) continue;
    waiters.push({
      runnerId: a.runner.id,
      runnerName: a.runner.name,
      group: p.group,
      labels: p.labels,
      executors: p.executors,
      groupAttributes: p.groupAttributes,
      exclusive: p.exclusive,
      maxLoad: p.maxLoad,
      runningLoad: p.runningLoad,
      slots: a.slots,
      onlyRunId: a.onlyRunId,
      drained: p.drained,
    });
    callOfWaiter.set(waiters[waiters.length - 1], a);
  }
  const totalSlots = waiters.filter((w) => !w.drained).reduce((n, w) => n + w.slots, 0);
  if (totalSlots === 0) return result;

  const delivered = await withTransaction(deps.pool, async (client) => {
    let deliveries: Delivery[] = [];
    let after: { lane: number; position: number } | undefined;
    const remaining = waiters.map((w) => {
      const copy = { ...w };
      callOfWaiter.set(copy, callOfWaiter.get(w)!);
      return copy;
    });
    // What earlier pages of this tick planned and the store does not show yet: the next page's
    // plan counts them, so a pin binds its siblings and no cap or pool limit is overrun.
    const fair = deps.fair.clone();
    const tickPins = new Map<number, string>();
    const tickOut = new Map<number, number>();
    const tickHolds = new Map<string, number>();
    let fleet: FleetRunner[] | undefined;
    let runnerRuns: Map<string, number> | undefined;
    for (let page = 0; page < MAX_PAGES; page++) {
      const open = remaining.filter((w) => w.slots > 0 && !w.drained);
      const slots = open.reduce((n, w) => n + w.slots, 0);
      if (slots === 0) break;
      const claims = await queueClaim(client, { shards: deps.ownedShards(), ...deps.claimLanes?.(), limit: Math.min(CLAIM_BATCH, slots), after });
      result.claimed += claims.length;
      if (claims.length === 0) break;
      // Only run-scoped runs are ever pinned or capped (the scope is frozen on every entry of the run).
      const scoped = [...new Set(claims.filter((c) => c.runScope).map((c) => c.runId))];
      const pins = await pinsForRuns(client, scoped);
      const outstanding = await leasesOutstandingByRun(client, scoped);
      const pools = await poolStateRead(client, [...new Set(claims.flatMap((c) => c.pools))]);
      runnerRuns ??= await runnerScopedRuns(client, [...new Set(waiters.map((w) => w.runnerId))]);
      for (const [run, runner] of tickPins) pins.set(run, runner);
      for (const [run, n] of tickOut) outstanding.set(run, (outstanding.get(run) ?? 0) + n);
      for (const [name, n] of tickHolds) {
        const p = pools.get(name);
        if (p) p.held += n;
      }
      // "Exceeds every max_load" is judged against the whole fleet, read only when a claim is
      // larger than some parked runner could ever take.
      const smallest = Math.min(...open.map((w) => w.maxLoad));
      if (!fleet && claims.some((c) => c.load > smallest)) fleet = (await fleetRead(client)).filter((r) => !r.drained);
      const plan = planDelivery({ claims, waiters: open, pools, pins, outstandingByRun: outstanding, acceptExceeding: deps.acceptExceeding, fairShare: fair, fleet, runnerRuns });
      result.returned += plan.returned.length;
      for (const d of plan.deliveries) {
        deliveries.push(d);
        fair.charge(d.entry.lane, d.entry.fairKey, d.entry.weight);
        if (d.pin) tickPins.set(d.entry.runId, d.waiter.runnerId);
        if (d.entry.runScope || pins.has(d.entry.runId)) {
          runnerRuns.set(d.waiter.runnerId, d.entry.runId);
          tickOut.set(d.entry.runId, (tickOut.get(d.entry.runId) ?? 0) + 1);
        }
        for (const name of d.entry.pools) tickHolds.set(name, (tickHolds.get(name) ?? 0) + 1);
        // The plan's waiter is this tick's copy of one acquire call: that call has one slot fewer,
        // and the runner's load grows on every call it has parked.
        d.waiter.slots -= 1;
        for (const w of remaining) if (w.runnerId === d.waiter.runnerId) w.runningLoad += d.entry.load;
      }
      if (claims.length < Math.min(CLAIM_BATCH, slots)) break;
      const last: QueueEntry = claims[claims.length - 1];
      after = { lane: last.lane, position: last.position };
    }
    if (deliveries.length === 0) return { leases: [] as Array<{ lease: LeaseRow; call: ParkedAcquire }>, details: new Map<number, OfferDetail>(), deliveries };
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
    for (const d of deliveries) callOf.set(d.entry.stepId, callOfWaiter.get(d.waiter)!);
    const items = deliveries.map((d) => {
      const call = callOf.get(d.entry.stepId)!;
      return { stepId: d.entry.stepId, runnerId: d.waiter.runnerId, requestId: call.requestId, acked: call.ackOnDelivery ?? false };
    });
    const leases = await leaseDeliver(client, { holder: deps.replicaId, ttlMs: deps.ttlMs, ackMs: ackDeadlineMs(deps.ttlMs), items });
    // A planned delivery that did not become a lease stays queued: it must not keep a pool hold.
    const leased = new Set(leases.map((l) => l.stepId));
    const unheld = deliveries.filter((d) => d.entry.pools.length > 0 && !leased.has(d.entry.stepId)).map((d) => d.entry.stepId);
    if (unheld.length > 0) await poolHoldRelease(client, unheld);
    await deps.hooks.stepsStarted(client, leases.map((l) => ({ stepId: l.stepId, attempt: l.attempt, runnerId: l.runnerId! })));
    const details = await offerDetails(client, leases.map((l) => l.stepId));
    return { leases: leases.map((lease) => ({ lease, call: callOf.get(lease.stepId)! })), details, deliveries };
  });

  result.delivered = delivered.leases.length;
  // Fair-share advances only for deliveries that committed.
  const committed = new Map(delivered.leases.map((l) => [l.lease.stepId, l.lease.deliveredAt ?? l.lease.claimedAt]));
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
async function answer(deps: DispatchDeps, delivered: Array<{ lease: LeaseRow; call: ParkedAcquire }>, details: Map<number, OfferDetail>): Promise<void> {
  const perCall = new Map<ParkedAcquire, Offer[]>();
  const leasesOf = new Map<ParkedAcquire, LeaseRow[]>();
  for (const { lease, call } of delivered) {
    perCall.set(call, [...(perCall.get(call) ?? []), toOffer(lease, details.get(lease.stepId), deps.ttlMs, deps.defaultStepTimeoutMs)]);
    leasesOf.set(call, [...(leasesOf.get(call) ?? []), lease]);
  }
  const orphaned: LeaseRow[] = [];
  for (const [call, offers] of perCall) {
    if (call.deliver(offers)) deps.events.emit('lease:delivered', { runnerId: call.runner.id, offers: offers.length });
    else orphaned.push(...leasesOf.get(call)!);
  }
  if (orphaned.length > 0) await handBack(deps, orphaned, 'acquire call ended before the offer was sent');
}

/** Busy ticks poll fast; idle ones back off to the idle cadence. In-process kicks cut any wait short. */
export function nextPollMs(last: TickResult, previousWaitMs: number): number {
  if (last.delivered > 0 || last.claimed > 0) return POLL_BUSY_MS;
  return Math.min(POLL_IDLE_MS, Math.max(POLL_BUSY_MS, previousWaitMs * 2));
}
