import type { EventEmitter } from 'node:events';
import type { LaneId } from './core/entry.js';
import type { TickResult } from './dispatch/dispatcher.js';
import type { Member } from './store/coordination.js';
import type { ReclaimedClaim } from './store/reclaim.js';
import type { LivenessChange } from './store/runner-liveness.js';
import type { LaunchReport } from './triggers/launch.js';

/*
 * Every in-process signal of a replica, by name and payload, in one map: typed, colon-namespaced
 * (graphile-worker's habit). The loops emit them; metrics, the other loops and tests listen, and
 * tests await them instead of sleeping.
 */

/** How an acquire long poll ended: handed offers, timed out empty, or held (drained runner, a drain or posture announced while it was parked, replica out of the membership). */
export type AcquireOutcome = 'offer' | 'empty' | 'held';

/** The runner-protocol calls a lease token is presented on. */
export type LeaseCall = 'ack' | 'renew' | 'complete' | 'release' | 'logs';

/**
 * In-process signals of the dispatch plane that carry counts, not ids: metrics and tests listen
 * to them. (`dispatch:tick`, `lease:delivered` and `lease:completed` predate this map.)
 */
/** What one coordination pass did; the payload of `coordination:tick`. */
export interface TickReport {
  replicaId: string;
  /** In the live membership (false while quiesced). */
  member: boolean;
  live: Member[];
  /** Shards whose lease this replica holds after the pass. */
  owned: number[];
  /** Shards rendezvous assigns to this replica (owned once their previous holder lets go). */
  desired: number[];
  released: number[];
  acquired: number[];
  leader: boolean;
  reclaimed: ReclaimedClaim[];
  liveness: LivenessChange[];
  reaped: string[];
  pruned: number;
}

/** The dispatch plane's signals: counts, not ids. */
interface DispatchEvents {
  'acquire:answered': { outcome: AcquireOutcome; offers: number };
  /** Committed deliveries: each step's wait from ready to delivered, by the database clock. */
  'dispatch:delivered': { waits: Array<{ lane: LaneId; seconds: number }> };
  /** Calls answered `lease expired or revoked`: the holder was fenced. */
  'lease:fenced': { call: LeaseCall; count: number };
  /** Completions recorded, by the step status they produced. */
  'lease:finished': { statuses: Record<'succeeded' | 'failed', number> };
  /** One expiry pass: offers never acked (requeued), delivered leases lost (runner_lost), undelivered claims returned. */
  'lease:expired': { requeued: number; lost: number; returned: number };
  /** A vacuum of the lease table this replica ran as its completions emptied it (ChurnVacuum). */
  'lease:vacuumed': { outcome: 'ok' | 'failed' };
  /** One dispatch tick's tally. */
  'dispatch:tick': TickResult;
  /** Offers handed to one parked acquire. */
  'lease:delivered': { runnerId: string; offers: number };
  /** A runner's completions committed, with the pools they freed (a kick for blocked entries). */
  'lease:completed': { runnerId: string; count: number; freed: string[] };
  /**
   * A posture or a drain announced on the queue channel, as this replica acted on it: parked calls
   * answered held at once, calls held by a tick or hand-off to be answered once let go, or
   * (`lifted`) planned again at once.
   */
  'lever:heard': { lever: 'posture' | 'drain'; held: number; owed: number; lifted: boolean };
}


/** The coordination loop's signals. */
interface CoordinationEvents {
  'coordination:tick': TickReport;
  'leader:gained': { replicaId: string; token: number };
  'leader:lost': { replicaId: string };
  'shards:changed': { replicaId: string; owned: number[]; added: number[]; removed: number[] };
  /** This replica entered or left the membership (quiesce / resume): waiters answer empty while out. */
  'membership:changed': { replicaId: string; member: boolean };
  /** Entries went back onto queue_ready (reclaim): a kick for the dispatch loop. */
  'queue:enqueued': { stepIds: number[]; source: string };
}


/** The launch loop's signals. */
interface LaunchEvents {
  /** One pass of the launch loop, with what it fired and when it looks next. */
  'launch:pass': LaunchReport;
}

export interface EventMap extends DispatchEvents, CoordinationEvents, LaunchEvents {}
export type EventName = keyof EventMap;

export function emit<K extends EventName>(events: EventEmitter, name: K, payload: EventMap[K]): void {
  events.emit(name, payload);
}

/** Listens for every event of that name; returns the call that stops listening. */
export function on<K extends EventName>(events: EventEmitter, name: K, listener: (p: EventMap[K]) => void): () => void {
  events.on(name, listener);
  return () => events.off(name, listener);
}

/** Resolves with the next event of that name whose payload satisfies `match`; rejects after the bound. */
export function nextEvent<K extends EventName>(events: EventEmitter, name: K, match: (p: EventMap[K]) => boolean = () => true, timeoutMs = 30_000): Promise<EventMap[K]> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      events.off(name, listener);
      reject(new Error(`no ${name} within ${timeoutMs}ms`));
    }, timeoutMs);
    function listener(p: EventMap[K]) {
      if (!match(p)) return;
      clearTimeout(timer);
      events.off(name, listener);
      resolve(p);
    }
    events.on(name, listener);
  });
}
