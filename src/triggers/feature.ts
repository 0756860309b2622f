import type { LeaderDuty } from '../coordination/duties.js';
import type { Logger } from '../logger.js';
import { startLoop, type LoopHandle } from '../loop.js';
import type { ReplicaEnv, ReplicaPart, ShardOwnership } from '../context.js';
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
export async function housekeepingOnce(deps: HousekeepingDeps, opts: { now?: Date } = {}): Promise<{ settled: number; deliveriesPruned: number; ticksPruned: number }> {
  const settled = await deliveriesSettleDisabled(deps.pool);
  // The retention is judged by the store's clock, or at `now` when given (tests set the time).
  const deliveriesPruned = await deliveriesPrune(deps.pool, { retentionMs: deps.retentionMs, now: opts.now });
  const ticksPruned = await ticksPrune(deps.pool, { retentionMs: deps.retentionMs, now: opts.now });
  if (settled + deliveriesPruned + ticksPruned > 0) deps.log.info({ settled, deliveriesPruned, ticksPruned }, 'trigger housekeeping');
  return { settled, deliveriesPruned, ticksPruned };
}

export interface LaunchFeatureOptions {
  timing?: Partial<LaunchTiming>;
}

/** Trigger history is kept this long by default. */
export const TRIGGER_RETENTION_MS = 30 * 86_400_000;
/** Housekeeping failed: the wait before it is tried again. */
const HOUSEKEEPING_RETRY_MS = 30_000;

/**
 * Trigger housekeeping as a leader duty: every discovery interval on the leader, the first one
 * interval after it became leader (a fresh leader has launches to fire first).
 */
export function triggerHousekeepingDuty(deps: HousekeepingDeps, everyMs = DEFAULT_LAUNCH_TIMING.discoveryIntervalMs): LeaderDuty<unknown> {
  return { name: 'trigger housekeeping', everyMs, retryMs: HOUSEKEEPING_RETRY_MS, fallback: undefined, run: () => housekeepingOnce(deps) };
}

/**
 * The launch loop of a replica: runs only while this replica leads (started on `leader:gained`,
 * stopped on `leader:lost`), woken by NOTIFY opschain_triggers whenever any replica writes a
 * trigger or a delivery, a templated run finishes (its template's deferred launches go at once) or an
 * operator runs `opschain admin reconcile` (every deferred row goes). Housekeeping is a leader duty
 * of the coordination loop (triggerHousekeepingDuty).
 */
export function startLaunch(ctx: ReplicaEnv, ownership: Pick<ShardOwnership, 'isLeader'>, opts: LaunchFeatureOptions = {}): ReplicaPart {
  const log = ctx.log.child({ component: 'launch' });
  const timing = { ...DEFAULT_LAUNCH_TIMING, ...opts.timing };
  const deferred = new DeferredLaunches();
  const deps: LaunchDeps = { pool: ctx.pool, log, deferred, timing, isLeader: () => ownership.isLeader(), events: ctx.events };

  let running: { loop: LoopHandle; listener: Listener } | undefined;
  let transition: Promise<void> = Promise.resolve();
  const start = () => {
    if (running) return;
    const loop = startLoop({ name: 'launch', clock: ctx.clock, log, once: async () => (await launchOnce(deps)).sleepMs, errorDelayMs: 1_000 });
    const listener = listenChannel(
      ctx.listenUrl,
      TRIGGERS_CHANNEL,
      (payload) => {
        if (payload?.startsWith('run:')) deferred.releaseTemplate(payload.slice(4));
        else if (payload === 'reconcile') {
          const n = deferred.releaseAll();
          log.info({ released: n }, 'reconcile: launch loop woken, held rows released');
        }
        loop.kick();
      },
      (err) => log.debug({ err: err.message }, 'triggers listener reconnecting'),
    );
    running = { loop, listener };
    log.info('launch loop started (leader)');
  };
  const stop = async () => {
    const r = running;
    running = undefined;
    if (!r) return;
    await r.listener.stop();
    await r.loop.stop();
    deferred.releaseAll();
    log.info('launch loop stopped');
  };
  const onGained = () => (transition = transition.then(start));
  const onLost = () => (transition = transition.then(stop));
  const stopListening = [on(ctx.events, 'leader:gained', onGained), on(ctx.events, 'leader:lost', onLost)];
  // A lone replica (no coordination loop) leads from the start.
  if (ownership.isLeader()) onGained();
  let stopped: Promise<void> | undefined;
  const stopAll = () =>
    (stopped ??= (async () => {
      for (const off of stopListening) off();
      await transition;
      await stop();
    })());
  return { halt: stopAll, stop: stopAll };
}
