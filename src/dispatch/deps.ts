import type { EventEmitter } from 'node:events';
import type { FairShare } from '../core/stride.js';
import type { Sampler } from '../core/trace-ids.js';
import type { Logger } from '../logger.js';
import type { OrchestratorHooks } from '../orchestrator/contract.js';
import type { Pool } from '../store/pool.js';
import type { ClaimParams } from '../store/queue.js';
import type { RecentlyClaimable } from './blocked.js';
import type { LeaseGroupCommit } from './group-commit.js';
import type { LeverNotices } from './lever-notices.js';
import type { WaiterRegistry } from './waiters.js';

/** What one replica's dispatcher is built from: its store, its signals, its settings. */
export interface DispatcherOptions {
  pool: Pool;
  log: Logger;
  replicaId: string;
  hooks: OrchestratorHooks;
  /** Shards whose lease this replica holds now. */
  ownedShards: () => number[];
  /** The cross-shard lanes this replica may claim from now (site lanes, aged any-shard lane). */
  claimLanes?: () => Pick<ClaimParams, 'site' | 'liveSites' | 'agedAfterMs'>;
  ttlMs: number;
  acceptExceeding: boolean;
  /** `steps.default_timeout`: offered for a step whose run file sets no timeout (none when unset). */
  defaultStepTimeoutMs?: number;
  /** Typed in-process signals: `dispatch:tick`, `lease:delivered`, `lease:completed`, `lease:expired`. */
  events: EventEmitter;
  /**
   * Leases this replica ends between two vacuums of the lease table (ChurnVacuum); 0 leaves the
   * table to autovacuum. Default LEASE_VACUUM_EVERY.
   */
  leaseVacuumEvery?: number;
  /** Set when this replica exports traces: offers name their attempt's span, sampled by it. */
  traceSampler?: Sampler;
  /** Completions read back their lease's times, for the attempt's spans (set with traceSampler). */
  traceLeases?: boolean;
  /** Shapes of unplaced entries judged claimable a moment ago, not judged again every tick; absent: every tick judges. */
  recentlyClaimable?: RecentlyClaimable;
  /** The local clock of the dispatcher's own cadence (how long a sighting of an empty queue holds). */
  now?: () => number;
}

/** What the dispatch loop, the acquire path and the lease lifecycle of one replica share: its Dispatcher. */
export interface DispatchDeps extends DispatcherOptions {
  registry: WaiterRegistry;
  /** This dispatcher's stride fair-share state: in memory, charged only for deliveries that committed. */
  fair: FairShare;
  /** The replica's group commit of acks, renewals and completions. */
  groupCommit: LeaseGroupCommit;
  /** Postures and drains announced by the store: what they answer or wake among the calls here. */
  levers: LeverNotices;
  /** Wake the dispatch loop now (capacity freed, a call parked). */
  kick: () => void;
  /**
   * Entries were put back on the queue here (released, handed back, requeued by the sweep): what
   * the last claim saw of the queue no longer holds. Wakes the loop.
   */
  queueChanged: () => void;
}
