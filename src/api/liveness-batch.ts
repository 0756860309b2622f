import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import { startLoop, type LoopHandle } from '../loop.js';
import type { Pool } from '../store/pool.js';
import { runnersSeen } from '../store/runners.js';

/** How often the runners seen on a replica are written, all in one statement. */
export const LIVENESS_FLUSH_MS = 1_000;

interface Pending {
  seenAt: number;
  waiters: Array<{ resolve: () => void; reject: (err: unknown) => void }>;
}

/**
 * The runners' liveness, written per batch, not per call: the runners seen since the last flush
 * (ParkedCalls already lets each through at most once per TOUCH_EVERY_MS) are written every
 * LIVENESS_FLUSH_MS by one statement, each stamped with when its call arrived (runnersSeen), so
 * what the liveness sweep and the views read is as exact as a write per call, up to one flush
 * late. A failed flush fails the touches it carried (ParkedCalls lets their next call try again).
 */
export class LivenessBatch {
  private pending = new Map<string, Pending>();
  private loop?: LoopHandle;

  constructor(private readonly deps: { pool: Pool; replicaId: string; clock: Clock; log: Logger; flushEveryMs?: number }) {}

  /** A call of this runner arrived now: written with the next flush (resolves when it is). */
  touch(runnerId: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const p = this.pending.get(runnerId);
      if (p) p.waiters.push({ resolve, reject });
      else this.pending.set(runnerId, { seenAt: this.deps.clock.now(), waiters: [{ resolve, reject }] });
    });
  }

  /** Writes every runner seen since the last flush in one statement (nothing when none was). */
  async flush(): Promise<number> {
    if (this.pending.size === 0) return 0;
    const batch = this.pending;
    this.pending = new Map();
    const now = this.deps.clock.now();
    try {
      await runnersSeen(this.deps.pool, { replicaId: this.deps.replicaId, seen: [...batch].map(([runnerId, p]) => ({ runnerId, agoMs: now - p.seenAt })) });
    } catch (err) {
      for (const p of batch.values()) for (const w of p.waiters) w.reject(err);
      throw err;
    }
    for (const p of batch.values()) for (const w of p.waiters) w.resolve();
    return batch.size;
  }

  /** Flushes every LIVENESS_FLUSH_MS until stopped. */
  start(): void {
    const every = this.deps.flushEveryMs ?? LIVENESS_FLUSH_MS;
    this.loop ??= startLoop({ name: 'liveness', clock: this.deps.clock, log: this.deps.log, errorDelayMs: every, once: async () => (await this.flush(), every) });
  }

  /** Stops the loop and writes nothing more, as a crash would (what is pending is lost). */
  async halt(): Promise<void> {
    const loop = this.loop;
    this.loop = undefined;
    await loop?.stop();
  }

  /** Stops the loop and writes what is pending; stopping twice is safe. */
  async stop(): Promise<void> {
    await this.halt();
    await this.flush().catch((err) => this.deps.log.warn({ err: (err as Error).message }, 'liveness: last flush failed'));
  }
}
