import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import { startLoop, type LoopHandle } from '../loop.js';
import type { Feature, ServerContext } from '../context.js';
import { on } from '../events.js';
import { listenChannel, type Listener } from '../store/listen.js';
import type { Pool } from '../store/pool.js';
import { deliveriesPrune, deliveriesSettleDisabled, ticksPrune, TRIGGERS_CHANNEL } from '../store/triggers.js';
import { DEFAULT_LAUNCH_TIMING, DeferredLaunches, launchOnce, type LaunchDeps, type LaunchTiming } from './launch.js';

export interface HousekeepingDeps {
  pool: Pool;
  log: Logger;
  /** Deliveries and ticks older than this are pruned (pending launches and undecided missed ticks never are). */
  retentionMs: number;
}

/** Settles the pending deliveries of disabled webhooks and prunes history past the retention. */
export async function housekeepingOnce(deps: HousekeepingDeps): Promise<{ settled: number; deliveriesPruned: number; ticksPruned: number }> {
  const settled = await deliveriesSettleDisabled(deps.pool);
  const deliveriesPruned = await deliveriesPrune(deps.pool, { retentionMs: deps.retentionMs });
  const ticksPruned = await ticksPrune(deps.pool, { retentionMs: deps.retentionMs });
  if (settled + deliveriesPruned + ticksPruned > 0) deps.log.info({ settled, deliveriesPruned, ticksPruned }, 'trigger housekeeping');
  return { settled, deliveriesPruned, ticksPruned };
}

export interface LaunchFeatureOptions {
  timing?: Partial<LaunchTiming>;
  /** Default 30 days. */
  retentionMs?: number;
}

/**
 * The launch loop of a replica: runs only while this replica leads (started on `leader:gained`,
 * stopped on `leader:lost`), woken by NOTIFY opschain_triggers whenever any replica writes a
 * trigger or a delivery, a templated run finishes (its template's held launches go at once) or an
 * operator runs `opschain admin reconcile` (every held row goes). Housekeeping runs on its own
 * slower timer (the discovery interval), on the leader only.
 */
export function launchFeature(opts: LaunchFeatureOptions = {}): Feature {
  return (ctx: ServerContext) => {
    const log = ctx.log.child({ component: 'launch' });
    const timing = { ...DEFAULT_LAUNCH_TIMING, ...opts.timing };
    const holds = new DeferredLaunches();
    const deps: LaunchDeps = { pool: ctx.pool, log, holds, timing, isLeader: () => ctx.ownership.isLeader(), events: ctx.events };

    let running: { loop: LoopHandle; housekeeping: LoopHandle; listener: Listener } | undefined;
    let transition: Promise<void> = Promise.resolve();
    const start = () => {
      if (running) return;
      const loop = startLoop({ name: 'launch', clock: ctx.clock, log, once: async () => (await launchOnce(deps)).sleepMs, errorDelayMs: 1_000 });
      const housekeeping = startHousekeeping(ctx.clock, { pool: ctx.pool, log, retentionMs: opts.retentionMs ?? 30 * 86_400_000 }, timing.discoveryIntervalMs, deps.isLeader);
      const listener = listenChannel(
        ctx.databaseUrl,
        TRIGGERS_CHANNEL,
        (payload) => {
          if (payload?.startsWith('run:')) holds.releaseTemplate(payload.slice(4));
          else if (payload === 'reconcile') {
            const n = holds.releaseAll();
            log.info({ released: n }, 'reconcile: launch loop woken, held rows released');
          }
          loop.kick();
        },
        (err) => log.debug({ err: err.message }, 'triggers listener reconnecting'),
      );
      running = { loop, housekeeping, listener };
      log.info('launch loop started (leader)');
    };
    const stop = async () => {
      const r = running;
      running = undefined;
      if (!r) return;
      await r.listener.stop();
      await Promise.all([r.loop.stop(), r.housekeeping.stop()]);
      holds.releaseAll();
      log.info('launch loop stopped');
    };
    const onGained = () => (transition = transition.then(start));
    const onLost = () => (transition = transition.then(stop));
    const stopListening = [on(ctx.events, 'leader:gained', onGained), on(ctx.events, 'leader:lost', onLost)];
    // A lone replica (no coordination loop) leads from the start.
    if (ctx.ownership.isLeader()) onGained();
    ctx.loops.push({
      kick: () => running?.loop.kick(),
      stop: async () => {
        for (const off of stopListening) off();
        await transition;
        await stop();
      },
    });
  };
}

function startHousekeeping(clock: Clock, deps: HousekeepingDeps, everyMs: number, isLeader: () => boolean): LoopHandle {
  let first = true;
  return startLoop({
    name: 'trigger housekeeping',
    clock,
    log: deps.log,
    once: async () => {
      // The first pass waits one interval: a fresh leader has launches to fire first.
      if (first) {
        first = false;
        return everyMs;
      }
      if (isLeader()) await housekeepingOnce(deps);
      return everyMs;
    },
    errorDelayMs: 30_000,
  });
}
