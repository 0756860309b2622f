import type { QueueEntry } from '../core/entry.js';
import { planDelivery } from '../core/plan.js';
import type { FreedOffer } from '../orchestrator/contract.js';
import { fleetParkedRead, fleetParkedReadAhead, type ParkedFleet } from '../store/fleet.js';
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
  /** What this replica knows of its queue (QueueSighting). */
  queueSighting(): QueueSighting;
  /** A read found due entries ahead of freed steps: a backlog, for the hand-offs that follow soon after. */
  sawAhead(): void;
  /** Fair share, events and answers of deliveries that committed, as a tick's are. */
  answerDelivered(delivered: CommittedDeliveries): Promise<void>;
}

/**
 * What a replica knows of the queue it claims from: `empty`, nothing due that a tick would claim
 * first; `backlog`, a hand-off found due entries ahead a moment ago, which a freed step would
 * wait behind (another read would only find so again: one read per busy poll in a backlog, not
 * one per completion); `unknown`, the hand-off reads what is due ahead.
 */
export type QueueSighting = 'empty' | 'backlog' | 'unknown';

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
 * The calls considered are the acquire calls carrying the group's completions (`carriers`: parked
 * already, held from the ticks until the completions commit, about to wait with their slots), then
 * the calls parked longest. A carrier's runner is read in the transaction, after its completions
 * ended their leases: its running load is what it will be once they commit, so a chain run by one
 * runner hops within one answer and a runner that is full after its completions gets nothing.
 *
 * It hands out only what a tick of this replica would have handed out the same way:
 *  - nothing overtaken: a freed entry goes only when no other due entry of its lane or a more
 *    urgent one is queued (known from this replica's last claim, QueueSeen, or else read in the
 *    transaction, beside the runners, over every shard; not read again for a busy poll after a
 *    read found some). A tick orders (lane, stride pass, ready time): an entry of the same lane
 *    queued earlier comes first unless the freed entry's fair key is behind in the stride, which
 *    only a read of every waiting key would tell, so the freed entry then waits for the tick that
 *    reads them; a less urgent lane comes after it in any tick. The freed entries are then planned
 *    in tick order with the tick's planner. Steps freed together that are not handed off (pooled,
 *    run-scoped) are their equals, not ahead of them;
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

  constructor(
    private readonly d: HandOffDeps,
    private readonly carriers: ParkedAcquire[] = [],
  ) {}

  /** The orchestrator's hook, bound to this hand-off. */
  readonly offer: FreedOffer = async (client, queued) => {
    const none = new Set<number>();
    if (this.delivered || this.sent) return none;
    const sighting = this.d.queueSighting();
    if (sighting === 'backlog') return none;
    const owned = new Set(this.d.ownedShards());
    const lanes = this.d.claimLanes?.();
    const takeable = queued.filter((e) => e.pools.length === 0 && !e.runScope && e.blockedOn === undefined && claimableByShard(e, owned, lanes));
    if (takeable.length === 0) return none;
    const carriers = this.carriers.filter((c) => c.carrying && !c.settled && !c.handOff && c.slots > 0);
    for (const c of carriers) c.handOff = true;
    const calls = [...carriers, ...this.d.registry.unheld(MAX_CALLS - carriers.length)];
    if (calls.length === 0) return none;
    this.calls = calls;
    const planned = await this.plan(client, calls, takeable, sighting === 'empty' ? null : queued);
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

  /**
   * The tick's planner over these calls and entries, with the posture and runners read in the
   * transaction; null: nothing to plan. `queued`: the entries the completions queued, when what is
   * due ahead of them is to be read in the same statement (null: the queue is known empty).
   */
  private async plan(client: Parameters<FreedOffer>[0], calls: ParkedAcquire[], takeable: QueueEntry[], queued: QueueEntry[] | null): Promise<{ ledger: TickLedger; waiters: TickWaiters } | null> {
    const ids = runnerIdsOf(calls);
    const parked: ParkedFleet & { aheadLane: number | null } = queued
      ? await fleetParkedReadAhead(client, ids, queued.map((e) => e.stepId))
      : { ...(await fleetParkedRead(client, ids)), aheadLane: null };
    if (offersStoppedBy(parked.posture)) return null;
    const ahead = parked.aheadLane;
    const waiters = new TickWaiters();
    waiters.add(calls, parked.runners);
    const open = waiters.open();
    if (open.length === 0) return null;
    // A step larger than some parked runner is judged against the whole fleet (exceeds every
    // max_load?): a tick's to do.
    const smallest = Math.min(...open.map((w) => w.maxLoad));
    if (ahead !== null && takeable.some((e) => e.lane >= ahead)) this.d.sawAhead();
    const claims = takeable.filter((e) => e.load <= smallest && (ahead === null || e.lane < ahead));
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
