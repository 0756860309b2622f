import type { EventEmitter } from 'node:events';
import type { Clock } from '../clock.js';
import { tracingSettings, type ServerConfig } from '../config.js';
import type { ReplicaPart, ShardOwnership } from '../context.js';
import { SHARD_FALLBACK_MS } from '../core/entry.js';
import type { Logger } from '../logger.js';
import { startLoop, type LoopHandle } from '../loop.js';
import type { OrchestratorHooks } from '../orchestrator/contract.js';
import { listenChannel } from '../store/listen.js';
import type { Pool } from '../store/pool.js';
import { QUEUE_CHANNEL } from '../store/queue.js';
import { RecentlyClaimable, UnblockCadence, unblockOnce } from './blocked.js';
import { Dispatcher, nextPollMs, POLL_IDLE_MS } from './dispatcher.js';
import { expireOnce } from './lifecycle.js';
import { on } from '../events.js';

export const EXPIRY_INTERVAL_MS = 5_000;

export interface DispatchFeatureOptions {
  hooks: OrchestratorHooks;
  /** Run the expiry sweep from this feature; off when the coordination loop runs it on its tick. */
  ownExpiryLoop?: boolean;
  /** Whether this replica is out of the membership (its polls idle for their window and are answered empty). */
  idlePolls?: () => boolean;
}

/** What the dispatch plane of a replica is built from. */
export interface DispatchEnv {
  config: ServerConfig;
  pool: Pool;
  log: Logger;
  clock: Clock;
  replicaId: string;
  events: EventEmitter;
  /** Where the LISTEN connection goes; null: none, the loops poll. */
  listenUrl: string | null;
}

/**
 * A running dispatch plane: its dispatcher, and its own shutdown. Before HTTP closes it answers
 * every parked poll empty (a parked poll would hold the close for a whole window); its stop ends
 * the loops and the listener.
 */
export interface DispatchPlane extends ReplicaPart {
  dispatcher: Dispatcher;
}

/**
 * The dispatch plane of one replica: the Dispatcher, its adaptive loop (250 ms busy → 2 s idle,
 * woken at once by in-process kicks and by NOTIFY from other processes), the check of entries set
 * aside and, unless the coordination loop runs it on the leader's tick, the expiry sweep. The
 * runner protocol routes that serve it are the API layer's (src/api/runner-api.ts).
 */
export function startDispatchPlane(env: DispatchEnv, ownership: ShardOwnership, opts: DispatchFeatureOptions): DispatchPlane {
  const tracing = tracingSettings(env.config);
  const dispatcher = new Dispatcher({
    pool: env.pool,
    log: env.log.child({ component: 'dispatch' }),
    replicaId: env.replicaId,
    hooks: opts.hooks,
    ownedShards: () => ownership.owned(),
    claimLanes: () =>
      // Out of the membership (quiesced), a replica claims nothing at all.
      ownership.inMembership()
        ? { site: env.config.site ?? null, liveSites: [...ownership.liveSites()], agedAfterMs: SHARD_FALLBACK_MS }
        : { site: null, liveSites: [], agedAfterMs: null },
    ttlMs: env.config.leaseTtlMs,
    acceptExceeding: env.config.acceptExceeding,
    defaultStepTimeoutMs: env.config.defaultStepTimeoutMs,
    events: env.events,
    recentlyClaimable: new RecentlyClaimable(() => env.clock.now()),
    now: () => env.clock.now(),
    ...(tracing ? { traceSampler: tracing.sampler, traceLeases: true } : {}),
  });
  const { log, registry } = dispatcher;
  const loops: LoopHandle[] = [];
  let wait = POLL_IDLE_MS;
  const loop = startLoop({
    name: 'dispatch',
    clock: env.clock,
    log,
    errorDelayMs: 1_000,
    once: async () => {
      // Calls a drain or posture held while this pass held them are answered once it lets go.
      const r = await dispatcher.pass().finally(() => dispatcher.levers.settle());
      wait = nextPollMs(r, wait);
      // A sighting of unplaceable work is claimed again once it lapses, however long the idle wait.
      return Math.min(wait, dispatcher.unplaceable.msLeft() ?? wait);
    },
  });
  // Blocked entries are checked beside the ticks, never ahead of one: a check reads the fleet,
  // and a tick waiting behind it would add that to every offer's latency.
  const unblock = new UnblockCadence();
  const unblockLoop = startLoop({
    name: 'unblock',
    clock: env.clock,
    log,
    once: async () => {
      const next = unblock.next(env.clock.now());
      if (next.inMs > 0) return next.inMs;
      // Entries that come back wake every dispatcher (the statement notifies), this one included.
      await unblockOnce(dispatcher.pool, { shards: dispatcher.ownedShards(), acceptExceeding: dispatcher.acceptExceeding, keys: next.keys });
      return unblock.next(env.clock.now()).inMs;
    },
  });
  loops.push(unblockLoop);
  dispatcher.wakeWith(() => loop.kick());
  loops.push(loop);
  const onEnqueued = () => dispatcher.queueChanged();
  const freed = (keys: string[]) => {
    unblock.nudge(keys, env.clock.now());
    unblockLoop.kick();
  };
  // A lease ended here: a run's step done, a runner's load freed, maybe a pool slot.
  const onCompleted = (c: { freed: string[] }) => {
    dispatcher.placementChanged();
    if (c.freed.length > 0) freed(c.freed);
  };
  // A quiesced replica answers its parked polls empty at once, so its runners fail over.
  const onMembership = (p: { member: boolean }) => {
    if (!p.member) registry.drainAll();
  };
  const stopListening = [on(env.events, 'queue:enqueued', onEnqueued), on(env.events, 'lease:completed', onCompleted), on(env.events, 'lease:expired', () => dispatcher.placementChanged()), on(env.events, 'membership:changed', onMembership)];
  // Work queued anywhere, or a pool slot freed on any replica (its entries set aside are checked at once).
  const onQueueNotice = (payload?: string) => {
    const key = dispatcher.queueNotice(payload);
    if (key !== null) freed([key]);
  };
  const listener = listenChannel(env.listenUrl, QUEUE_CHANNEL, onQueueNotice, (err) => {
    // Notifications sent while it reconnects are lost: claim again rather than trust the last sighting.
    dispatcher.seen.changed();
    dispatcher.unplaceable.changed();
    log.debug({ err: err.message }, 'queue listener reconnecting');
  });
  if (opts.ownExpiryLoop !== false) {
    loops.push(startLoop({ name: 'expiry', clock: env.clock, log, once: async () => (await expireOnce(dispatcher), EXPIRY_INTERVAL_MS) }));
  }
  let stopped: Promise<void> | undefined;
  return {
    dispatcher,
    halt: async () => {
      await Promise.all(loops.map((l) => l.stop()));
    },
    beforeClose: async () => registry.drainAll(),
    stop: () =>
      (stopped ??= (async () => {
        await Promise.all(loops.map((l) => l.stop()));
        for (const off of stopListening) off();
        registry.drainAll();
        await listener.stop();
      })()),
  };
}
