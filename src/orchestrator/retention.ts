import type { Logger } from '../logger.js';
import { withTransaction, type Pool } from '../store/pool.js';
import { runHistoryPrune, type HistoryPruned } from '../store/retention.js';

/** Runs per batch: each batch is one short transaction, so the pruner never holds many rows at once. */
export const HISTORY_BATCH = 100;
/** Batches per leader tick: at most 1,000 runs a tick (720,000 an hour at the 5 s tick). */
export const HISTORY_MAX_BATCHES = 10;

export interface HistoryPruneResult extends HistoryPruned { batches: number }

/**
 * One retention pass, run by the leader: finished runs older than `retentionDays` (with their
 * steps and logs) go in batches of `batchSize`, each its own transaction, until a batch comes back
 * short or `maxBatches` ran. A running run is never pruned. Age is judged at `now` when given
 * (tests set the time), else by the store's clock.
 */
export async function historyPruneOnce(pool: Pool, p: { retentionDays: number; batchSize?: number; maxBatches?: number; now?: Date }): Promise<HistoryPruneResult> {
  const limit = p.batchSize ?? HISTORY_BATCH;
  const total: HistoryPruneResult = { runs: 0, steps: 0, logs: 0, batches: 0 };
  for (let i = 0; i < (p.maxBatches ?? HISTORY_MAX_BATCHES); i++) {
    const b = await withTransaction(pool, (client) => runHistoryPrune(client, { retentionDays: p.retentionDays, limit, now: p.now }));
    if (b.runs === 0) break;
    total.runs += b.runs;
    total.steps += b.steps;
    total.logs += b.logs;
    total.batches += 1;
    if (b.runs < limit) break;
  }
  return total;
}

/** The leader pass: prunes history past `retention.runs_days` and says how much went. */
export const historyRetentionPass = async (ctx: { pool: Pool; log: Logger; config: { runsRetentionDays: number } }, opts: { now?: Date } = {}): Promise<HistoryPruneResult> => {
  const r = await historyPruneOnce(ctx.pool, { retentionDays: ctx.config.runsRetentionDays, now: opts.now });
  if (r.runs > 0) ctx.log.info({ runs: r.runs, steps: r.steps, logs: r.logs, batches: r.batches, retentionDays: ctx.config.runsRetentionDays }, 'pruned finished runs past the retention');
  return r;
};
