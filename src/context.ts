import type { EventEmitter } from 'node:events';
import type { Readiness } from './api/readiness.js';
import type { Clock } from './clock.js';
import type { ServerConfig } from './config.js';
import type { Logger } from './logger.js';
import type { Pool } from './store/pool.js';

/** Which shards this replica may dispatch now, and whether it leads; the coordination loop keeps it current. */
export interface ShardOwnership {
  owned(): number[];
  isLeader(): boolean;
  /** Sites that have at least one live, unquiesced replica. */
  liveSites(): Set<string>;
  /** False while this replica is quiesced: it claims nothing and answers parked polls empty. */
  inMembership(): boolean;
}

/** A lone replica before coordination runs: owns every shard. */
export function soleOwnership(): ShardOwnership {
  const all = Array.from({ length: 64 }, (_, i) => i);
  return { owned: () => all, isLeader: () => true, liveSites: () => new Set(), inMembership: () => true };
}

/**
 * What every part of one replica is built from, fixed before any part is built. Nothing is added
 * to it later: a part that needs another part is handed it by the composition root (src/server.ts),
 * so the order in which parts start is the order their arguments allow.
 */
export interface ReplicaEnv {
  readonly config: ServerConfig;
  readonly pool: Pool;
  readonly log: Logger;
  readonly clock: Clock;
  readonly replicaId: string;
  readonly readiness: Readiness;
  /** In-process signals between loops (`queue:enqueued`, `lease:completed`, …). */
  readonly events: EventEmitter;
  /** The URL of the store this replica uses. */
  readonly databaseUrl: string;
  /** Where LISTEN connections go (a direct session); null: none (a transaction pooler, no listen URL), the loops poll. */
  readonly listenUrl: string | null;
}

/** A running part of a replica (its loops, listeners, parked calls), with its own shutdown. */
export interface ReplicaPart {
  /** Stops the part's loops and nothing else, as a crash would (tests of a replica that dies without a word). */
  halt(): Promise<void>;
  /** The start of a clean shutdown, before HTTP drains its requests (hand leases over, answer parked polls). */
  beforeClose?(): Promise<void>;
  /** After HTTP closed, in reverse start order, before the pool closes; stopping twice is safe. */
  stop(): Promise<void>;
}
