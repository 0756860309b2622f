import type { Waiter } from '../core/entry.js';
import type { Delivery } from '../core/plan.js';
import { leaseDeliver, pinsCreate, pinsForRuns, type DeliveredLease, type OfferDetail } from '../store/leases.js';
import type { PoolClient } from '../store/pool.js';
import { poolSlotsTake, poolSlotsFree } from '../store/pools.js';
import type { DispatchDeps } from './deps.js';
import { ackDeadlineMs } from './offers.js';
import type { ParkedAcquire } from './waiters.js';

export interface CommittedDeliveries {
  /** Each lease with the acquire call it goes to. */
  leases: Array<{ lease: DeliveredLease; call: ParkedAcquire }>;
  details: Map<number, OfferDetail>;
  /** The planned deliveries that were attempted (after pool holds and pins). */
  deliveries: Delivery[];
  /** Attempted deliveries whose entry was gone when the delivery ran (only an unlocked claim can lose one). */
  lost: number;
}

/**
 * Writes a tick's planned deliveries on its client: pool holds, the pins the tick made, the leases,
 * and the steps' start. Inside the tick's transaction when it locked; otherwise the delivery's own
 * statement takes each entry once and commits alone.
 */
export async function commitDeliveries(
  client: PoolClient,
  deps: Pick<DispatchDeps, 'replicaId' | 'ttlMs' | 'hooks'>,
  planned: { deliveries: Delivery[]; pinned: Map<number, string>; callOf: Map<Waiter, ParkedAcquire> },
): Promise<CommittedDeliveries> {
  // Pool slots, all or none per step, limit rows locked in name order; a step another replica
  // filled the pool ahead of stays queued (its claim is simply not delivered).
  const granted = await poolSlotsTake(client, planned.deliveries.filter((d) => d.entry.pools.length > 0).map((d) => ({ stepId: d.entry.stepId, attempt: d.entry.attempt, pools: d.entry.pools })));
  let deliveries = planned.deliveries.filter((d) => d.entry.pools.length === 0 || granted.has(d.entry.stepId));
  // Pins are written before the deliveries, in this transaction, for every run this tick pinned
  // that still has a delivery. A run another replica pinned meanwhile (aged any-shard claims)
  // keeps that pin: deliveries here that disagree with it are dropped.
  const pinRuns = [...new Set(deliveries.filter((d) => planned.pinned.has(d.entry.runId)).map((d) => d.entry.runId))];
  if (pinRuns.length > 0) {
    await pinsCreate(client, pinRuns.map((runId) => ({ runId, runnerId: planned.pinned.get(runId)! })));
    const actual = await pinsForRuns(client, pinRuns);
    const dropped = deliveries.filter((d) => actual.has(d.entry.runId) && actual.get(d.entry.runId) !== d.waiter.runnerId);
    if (dropped.length > 0) {
      await poolSlotsFree(client, dropped.map((d) => d.entry.stepId));
      deliveries = deliveries.filter((d) => !dropped.includes(d));
    }
  }
  // Each offer goes to the acquire call it was planned on (its slots and its only_run_id held).
  const callOf = new Map<number, ParkedAcquire>();
  for (const d of deliveries) callOf.set(d.entry.stepId, planned.callOf.get(d.waiter)!);
  const items = deliveries.map((d) => {
    const call = callOf.get(d.entry.stepId)!;
    return { stepId: d.entry.stepId, runnerId: d.waiter.runnerId, requestId: call.requestId };
  });
  const along = deps.hooks.stepsStartedWithDelivery;
  const offers = await leaseDeliver(client, { holder: deps.replicaId, ttlMs: deps.ttlMs, ackMs: ackDeadlineMs(deps.ttlMs), items, along });
  const leases = offers.map((o) => o.lease);
  // A planned delivery that did not become a lease stays queued: it must not keep a pool slot.
  const leased = new Set(leases.map((l) => l.stepId));
  const freed = deliveries.filter((d) => d.entry.pools.length > 0 && !leased.has(d.entry.stepId)).map((d) => d.entry.stepId);
  if (freed.length > 0) await poolSlotsFree(client, freed);
  if (!along) await deps.hooks.stepsStarted(client, leases.map((l) => ({ stepId: l.stepId, attempt: l.attempt, runnerId: l.runnerId })));
  const details = new Map<number, OfferDetail>();
  for (const o of offers) if (o.detail) details.set(o.lease.stepId, o.detail);
  return { leases: leases.map((lease) => ({ lease, call: callOf.get(lease.stepId)! })), details, deliveries, lost: deliveries.length - leases.length };
}
