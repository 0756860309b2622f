import type { EventEmitter } from 'node:events';
import type { FastifyInstance } from 'fastify';
import type { Readiness } from './api/readiness.js';
import type { Clock } from './clock.js';
import type { ServerConfig } from './config.js';
import type { DispatchDeps } from './dispatch/deps.js';
import type { Logger } from './logger.js';
import type { LoopHandle } from './loop.js';
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

/** Everything a feature of one replica needs; features register routes and loops through it. */
export interface ServerContext {
  config: ServerConfig;
  pool: Pool;
  log: Logger;
  clock: Clock;
  replicaId: string;
  readiness: Readiness;
  app: FastifyInstance;
  /** In-process signals between loops (`queue:enqueued`, `lease:completed`, …). */
  events: EventEmitter;
  loops: LoopHandle[];
  /** Replaced by the coordination feature; dispatch reads it every tick. */
  ownership: ShardOwnership;
  /** The URL of the store this replica uses. */
  databaseUrl: string;
  /** Where LISTEN connections go (a direct session); null: none (a transaction pooler, no listen URL), the loops poll. */
  listenUrl: string | null;
  /** Set by the dispatch feature: what the lease lifecycle and the runner routes share. */
  dispatch?: DispatchDeps;
  /** Run at shutdown, in reverse order of registration, before the pool closes. */
  onStop: Array<() => Promise<void>>;
}

/** A feature wires itself into a starting replica (routes, loops, stop hooks). */
export type Feature = (ctx: ServerContext) => void | Promise<void>;
