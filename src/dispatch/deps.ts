import type { EventEmitter } from 'node:events';
import type { FairShare } from '../core/stride.js';
import type { Sampler } from '../core/trace-ids.js';
import type { Logger } from '../logger.js';
import type { OrchestratorHooks } from '../orchestrator/contract.js';
import type { Pool } from '../store/pool.js';
import type { ClaimParams } from '../store/queue.js';
import type { RecentlyClaimable } from './blocked.js';
import type { WaiterRegistry } from './waiters.js';

/** What the dispatch loop and the lease lifecycle of one replica share. */
export interface DispatchDeps {
  pool: Pool;
  log: Logger;
  replicaId: string;
  registry: WaiterRegistry;
  hooks: OrchestratorHooks;
  /** Shards whose lease this replica holds now. */
  ownedShards: () => number[];
  /** The cross-shard lanes this replica may claim from now (site lanes, aged any-shard lane). */
  claimLanes?: () => Pick<ClaimParams, 'site' | 'liveSites' | 'agedAfterMs'>;
  ttlMs: number;
  acceptExceeding: boolean;
  /** `steps.default_timeout`: offered for a step whose run file sets no timeout (none when unset). */
  defaultStepTimeoutMs?: number;
  /** This dispatcher's stride fair-share state: in memory, charged only for deliveries that committed. */
  fair: FairShare;
  /** Typed in-process signals: `dispatch:tick`, `lease:delivered`, `lease:completed`, `lease:expired`. */
  events: EventEmitter;
  /** Wake the dispatch loop now (capacity freed, a call parked). */
  kick: () => void;
  /**
   * Entries were put back on the queue here (released, handed back, requeued by the sweep): what
   * the last claim saw of the queue no longer holds. Wakes the loop.
   */
  queueChanged: () => void;
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
}
