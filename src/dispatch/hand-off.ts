import type { QueueEntry } from '../core/entry.js';
import { planDelivery } from '../core/plan.js';
import type { FreedOffer } from '../orchestrator/contract.js';
import { fleetParkedRead } from '../store/fleet.js';
import type { ClaimParams } from '../store/queue.js';
import { commitDeliveries, type CommittedDeliveries } from './commit-deliveries.js';
import type { DispatchDeps } from './deps.js';
import { offersStoppedBy } from './postures.js';
import { TickLedger } from './tick-ledger.js';
import { runnerIdsOf, TickWaiters } from './tick-waiters.js';
import type { ParkedAcquire } from './waiters.js';

/**
 * Parked calls one hand-off considers, the longest waiting first: its read of their runners rides
 * in a completion's transaction, which must stay short however large the parked fleet. A step
 * none of them can take is left to the ticks, which consider every call.
 */
const MAX_CALLS = 64;

/** What a hand-off needs of its replica's dispatcher. */
export interface HandOffDeps extends Pick<DispatchDeps, 'registry' | 'fair' | 'acceptExceeding' | 'hooks' | 'replicaId' | 'ttlMs' | 'ownedShards' | 'claimLanes'> {
  /** Whether this replica's queue is known to hold nothing due that a tick would claim first. */
  queueKnownEmpty(): boolean;
  /** Fair share, events and answers of deliveries that committed, as a tick's are. */
  answerDelivered(delivered: CommittedDeliveries): Promise<void>;
}

/**
 * Whether a claim of this replica would take the entry from its shard lane: an owned shard, and no
 * stamp for another live site (queueClaim's first branch). Entries only the cross-shard lanes
 * reach are left to the ticks.
 */
export function claimableByShard(e: Pick<QueueEntry, 'shard' | 'siteStamp'>, owned: ReadonlySet<number>, lanes?: Pick<ClaimParams, 'site' | 'liveSites'>): boolean {
  if (!owned.has(e.shard)) return false;
  const live = lanes?.liveSites ?? [];
  return e.siteStamp === null || live.length === 0 || e.siteStamp === (lanes?.site ?? null) || !live.includes(e.siteStamp);
}

/**
 * Steps a group of completions frees, handed to this replica's parked calls inside the group's own
 * transaction: the lease, the delivery and the step's start commit with the completion, so a hop
 * along a chain costs one commit instead of two (and no wake-up, claim or second flush between).
 *
 * It hands out only what a tick of this replica would have handed out the same way:
 *  - only while the queue is known to hold nothing due here (QueueSeen): nothing queued earlier
 *    would have come first, so lanes and fair-share order are those of a tick that claimed only
 *    these entries, and they are planned in that order with the tick's planner;
 *  - only entries a tick of this replica claims from its own shards (site stamps honoured), in no
 *    pool and not run-scoped (no pool hold to lock and no pin to write inside a completion, whose
 *    run locks are held already), and no larger than every parked match (judged by the fleet);
 *  - only to calls no tick holds (held here, as a tick holds its snapshot, and no tick takes
 *    them until the transaction ends; at most MAX_CALLS of them), after the
 *    posture and the runners (drains, labels, running load) are read in the same transaction: a
 *    fleet held by a posture or a drained runner gets nothing;
 *  - with the delivery every tick writes (commitDeliveries): a fresh token and the ack deadline.
 *
 * Everything else stays queued and is announced as any enqueue is. The calls are answered once
 * the transaction has committed (`settle`); if it fails after the delivery was sent, each call
 * that was to get an offer is answered 503 so that it retries its request id, as a failed tick's.
 */
export class FreedHandOff {
  private calls: ParkedAcquire[] = [];
  private delivered: CommittedDeliveries | null = null;
  /** The calls the delivery was planned to, once it was sent: a failure may have committed it. */
  private sent: Set<ParkedAcquire> | null = null;

  constructor(private readonly d: HandOffDeps) {}

  /** The orchestrator's hook, bound to this hand-off. */
  readonly offer: FreedOffer = async (client, queued) => {
    const none = new Set<number>();
    if (this.delivered || this.sent || !this.d.queueKnownEmpty()) return none;
    const owned = new Set(this.d.ownedShards());
    const lanes = this.d.claimLanes?.();
    const takeable = queued.filter((e) => e.pools.length === 0 && !e.runScope && e.blockedOn === undefined && claimableByShard(e, owned, lanes));
    if (takeable.length === 0) return none;
    const calls = this.d.registry.unheld(MAX_CALLS);
    if (calls.length === 0) return none;
    this.calls = calls;
    const planned = await this.plan(client, calls, takeable);
    // Calls given nothing are let go at once: a tick may serve them while this transaction ends.
    const kept = new Set(planned ? planned.ledger.deliveries.map((p) => planned.waiters.callOf.get(p.waiter)!) : []);
    this.d.registry.letGo(calls.filter((c) => !kept.has(c)));
    this.calls = [...kept];
    if (!planned || kept.size === 0) return none;
    const { ledger, waiters } = planned;
    this.sent = kept;
    this.delivered = await commitDeliveries(client, this.d, { deliveries: ledger.deliveries, pinned: ledger.pinned, callOf: waiters.callOf });
    return new Set(this.delivered.leases.map((l) => l.lease.stepId));
  };

  /** The tick's planner over these calls and entries, with the posture and runners read in the transaction; null: nothing to plan. */
  private async plan(client: Parameters<FreedOffer>[0], calls: ParkedAcquire[], takeable: QueueEntry[]): Promise<{ ledger: TickLedger; waiters: TickWaiters } | null> {
    const parked = await fleetParkedRead(client, runnerIdsOf(calls));
    if (offersStoppedBy(parked.posture)) return null;
    const waiters = new TickWaiters();
    waiters.add(calls, parked.runners);
    const open = waiters.open();
    if (open.length === 0) return null;
    // A step larger than some parked runner is judged against the whole fleet (exceeds every
    // max_load?): a tick's to do.
    const smallest = Math.min(...open.map((w) => w.maxLoad));
    const claims = takeable.filter((e) => e.load <= smallest);
    if (claims.length === 0) return null;
    const ledger = new TickLedger(this.d.fair);
    const view = ledger.planInput();
    const plan = planDelivery({ claims, waiters: open, ...view, acceptExceeding: this.d.acceptExceeding, fairShare: ledger.fair, runnerRuns: waiters.runnerRuns });
    for (const p of plan.deliveries) waiters.planned(p, ledger.record(p, view));
    return { ledger, waiters };
  }

  /** The transaction committed: the calls get their offers, the rest are let go. */
  async settle(): Promise<void> {
    const calls = this.calls;
    this.calls = [];
    try {
      if (this.delivered && this.delivered.leases.length > 0) await this.d.answerDelivered(this.delivered);
    } finally {
      this.d.registry.letGo(calls);
    }
  }

  /** The transaction failed: nothing was handed out, unless the failure came after the delivery was sent. */
  fail(err: unknown): void {
    const calls = this.calls;
    this.calls = [];
    // Calls planned on may hold a committed delivery: they retry their request id and find it.
    if (this.sent) this.d.registry.failUnanswered([...this.sent], err);
    this.d.registry.letGo(calls);
  }
}
