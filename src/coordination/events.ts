import type { EventEmitter } from 'node:events';
import type { Member } from '../store/coordination.js';
import type { ReclaimedClaim } from '../store/reclaim.js';
import type { LivenessChange } from '../store/runner-liveness.js';

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

/** Typed, colon-namespaced in-process signals of the coordination loop; tests await them. */
export interface CoordinationEventMap {
  'coordination:tick': TickReport;
  'leader:gained': { replicaId: string; token: number };
  'leader:lost': { replicaId: string };
  'shards:changed': { replicaId: string; owned: number[]; added: number[]; removed: number[] };
  /** This replica entered or left the membership (quiesce / resume): waiters answer empty while out. */
  'membership:changed': { replicaId: string; member: boolean };
  /** Entries went back onto queue_ready (reclaim): a kick for the dispatch loop. */
  'queue:enqueued': { stepIds: number[]; source: string };
}

export type CoordinationEvent = keyof CoordinationEventMap;

export function emitCoordination<K extends CoordinationEvent>(events: EventEmitter, name: K, payload: CoordinationEventMap[K]): void {
  events.emit(name, payload);
}

/** Resolves with the next event of that name whose payload satisfies `match`; rejects after the bound. */
export function nextCoordinationEvent<K extends CoordinationEvent>(
  events: EventEmitter,
  name: K,
  match: (p: CoordinationEventMap[K]) => boolean = () => true,
  timeoutMs = 30_000,
): Promise<CoordinationEventMap[K]> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      events.off(name, listener);
      reject(new Error(`no ${name} within ${timeoutMs}ms`));
    }, timeoutMs);
    function listener(p: CoordinationEventMap[K]) {
      if (!match(p)) return;
      clearTimeout(timer);
      events.off(name, listener);
      resolve(p);
    }
    events.on(name, listener);
  });
}
