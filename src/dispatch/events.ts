import type { EventEmitter } from 'node:events';
import type { LaneId } from '../core/entry.js';

/** How an acquire long poll ended: handed offers, timed out empty, or held (drained runner, replica out of the membership). */
export type AcquireOutcome = 'offer' | 'empty' | 'held';

/** The runner-protocol calls a lease token is presented on. */
export type LeaseCall = 'ack' | 'renew' | 'complete' | 'release' | 'logs';

/**
 * In-process signals of the dispatch plane that carry counts, not ids: metrics and tests listen
 * to them. (`dispatch:tick`, `lease:delivered` and `lease:completed` predate this map.)
 */
export interface DispatchEventMap {
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
}

export function emitDispatch<K extends keyof DispatchEventMap>(events: EventEmitter, name: K, payload: DispatchEventMap[K]): void {
  events.emit(name, payload);
}

export function onDispatch<K extends keyof DispatchEventMap>(events: EventEmitter, name: K, listener: (p: DispatchEventMap[K]) => void): () => void {
  events.on(name, listener);
  return () => events.off(name, listener);
}
