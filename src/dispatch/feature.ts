import { FairShare } from '../core/stride.js';
import type { OrchestratorHooks } from '../orchestrator/contract.js';
import { SHARD_FALLBACK_MS } from '../coordination/coordinator.js';
import { startLoop } from '../loop.js';
import type { ServerContext } from '../context.js';
import { listenChannel } from '../store/listen.js';
import { QUEUE_CHANNEL } from '../store/queue.js';
import { RecentlyClaimable, UnblockCadence, unblockOnce } from './blocked.js';
import type { DispatchDeps } from './deps.js';
import { dispatchPass, nextPollMs, POLL_BUSY_MS, POLL_IDLE_MS } from './dispatcher.js';
import { expireOnce } from './lifecycle.js';
import { QueueSeen } from './queue-seen.js';
import { WaiterRegistry } from './waiters.js';
import { on } from '../events.js';

export const EXPIRY_INTERVAL_MS = 5_000;

export interface DispatchFeatureOptions {
  hooks: OrchestratorHooks;
  /** Run the expiry sweep from this feature; off when the coordination loop runs it on its tick. */
  ownExpiryLoop?: boolean;
  /** Whether this replica is out of the membership (its polls are held and answered empty). */
  holdPolls?: () => boolean;
}

/**
 * The dispatch plane of one replica: parked acquires, the adaptive dispatch loop (250 ms busy →
 * 2 s idle, woken at once by in-process kicks and by NOTIFY from other processes) and the expiry
 * sweep, installed on the context (`ctx.dispatch`). The runner protocol routes that serve it are
 * the API layer's (`dispatchFeature` in src/api/dispatch-feature.ts).
 */
export function dispatchPlane(ctx: ServerContext, opts: DispatchFeatureOptions): DispatchDeps {
  const registry = new WaiterRegistry();
  let kickLoop = () => {};
  const seen = new QueueSeen(() => ctx.clock.now(), POLL_BUSY_MS);
  const queueChanged = () => {
    seen.changed();
    kickLoop();
  };
  const deps: DispatchDeps = {
    pool: ctx.pool,
    log: ctx.log.child({ component: 'dispatch' }),
    replicaId: ctx.replicaId,
    registry,
    hooks: opts.hooks,
    ownedShards: () => ctx.ownership.owned(),
    claimLanes: () =>
      // Out of the membership (quiesced), a replica claims nothing at all.
      ctx.ownership.inMembership()
        ? { site: ctx.config.site ?? null, liveSites: [...ctx.ownership.liveSites()], agedAfterMs: SHARD_FALLBACK_MS }
        : { site: null, liveSites: [], agedAfterMs: null },
    ttlMs: ctx.config.leaseTtlMs,
    acceptExceeding: ctx.config.acceptExceeding,
    defaultStepTimeoutMs: ctx.config.defaultStepTimeoutMs,
    fair: new FairShare(),
    events: ctx.events,
    kick: () => kickLoop(),
    queueChanged,
    recentlyClaimable: new RecentlyClaimable(() => ctx.clock.now()),
  };
  ctx.dispatch = deps;
  let wait = POLL_IDLE_MS;
  const loop = startLoop({
    name: 'dispatch',
    clock: ctx.clock,
    log: deps.log,
    errorDelayMs: 1_000,
    once: async () => {
      const r = await dispatchPass(deps, seen);
      wait = nextPollMs(r, wait);
      return wait;
    },
  });
  // Blocked entries are checked beside the ticks, never ahead of one: a check reads the fleet,
  // and a tick waiting behind it would add that to every offer's latency.
  const unblock = new UnblockCadence();
  const unblockLoop = startLoop({
    name: 'unblock',
    clock: ctx.clock,
    log: deps.log,
    once: async () => {
      const next = unblock.next(ctx.clock.now());
      if (next.inMs > 0) return next.inMs;
      // Entries that come back wake every dispatcher (the statement notifies), this one included.
      await unblockOnce(deps.pool, { shards: deps.ownedShards(), acceptExceeding: deps.acceptExceeding, keys: next.keys });
      return unblock.next(ctx.clock.now()).inMs;
    },
  });
  ctx.loops.push(unblockLoop);
  kickLoop = () => loop.kick();
  ctx.loops.push(loop);
  on(ctx.events, 'queue:enqueued', queueChanged);
  on(ctx.events, 'lease:completed', (c) => {
    if (c.freed.length === 0) return;
    unblock.nudge(c.freed, ctx.clock.now());
    unblockLoop.kick();
  });
  // A quiesced replica answers its parked polls empty at once, so its runners fail over.
  on(ctx.events, 'membership:changed', (p) => {
    if (!p.member) registry.drainAll();
  });
  const dbUrl = ctx.databaseUrl;
  const listener = listenChannel(dbUrl, QUEUE_CHANNEL, queueChanged, (err) => {
    // Notifications sent while it reconnects are lost: claim again rather than trust the last sighting.
    seen.changed();
    deps.log.debug({ err: err.message }, 'queue listener reconnecting');
  });
  // Parked long polls would hold the HTTP close for a whole poll window: answer them first.
  ctx.app.addHook('preClose', async () => registry.drainAll());
  ctx.onStop.push(async () => {
    registry.drainAll();
    await listener.stop();
  });
  if (opts.ownExpiryLoop !== false) {
    ctx.loops.push(startLoop({ name: 'expiry', clock: ctx.clock, log: deps.log, once: async () => (await expireOnce(deps), EXPIRY_INTERVAL_MS) }));
  }
  return deps;
}
