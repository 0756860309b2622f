import { performance } from 'node:perf_hooks';
import { DEFAULT_TIMING } from '../src/coordination/coordinator.js';
import { adminQueueRead, queueLaneDepth } from '../src/store/admin-queue.js';
import { gaugeSnapshotRead } from '../src/store/metrics.js';
import { postureRead } from '../src/store/posture.js';
import { migrate } from '../src/store/migrate.js';
import { createPool } from '../src/store/pool.js';
import { buildAdminQueue } from '../src/views/admin-queue.js';
import type { BenchEnv } from './opschain.js';
import { prequeue, readyCount } from './prequeue.js';
import { figure, percentile, type Figure } from './stats.js';

/** What the issue asks of one refresh at each depth. */
const TARGETS_MS: Record<number, number> = { 100_000: 100, 1_000_000: 250 };
const REFRESHES = 7;

/**
 * The cost of one console refresh (`admin queue`, `GET /api/admin/queue`, one tick of `--watch`):
 * the REPEATABLE READ snapshot plus the view-model, at each depth of ready entries spread over
 * projects and lanes. Median of a few refreshes after one warm-up.
 */
export async function consoleFigures(env: BenchEnv): Promise<Figure[]> {
  const db = await env.dbs.create('console');
  const pool = createPool(db.url, { max: 4, applicationName: 'opschain-bench', statementTimeoutMs: 1_800_000, queryTimeoutMs: 1_800_000 });
  const figures: Figure[] = [];
  try {
    await migrate(pool);
    for (const depth of env.sizes.consoleDepths) {
      const have = await readyCount(pool);
      if (have < depth) {
        env.progress(`console: queueing ${depth - have} ready entries (to ${depth})`);
        await prequeue(pool, { entries: depth - have, stepsPerRun: env.sizes.stepsPerRun, label: `console-${depth}`, progress: env.progress });
      }
      const samples: number[] = [];
      let estimated = false;
      for (let i = 0; i <= REFRESHES; i++) {
        const t0 = performance.now();
        const view = buildAdminQueue(await adminQueueRead(pool, { limit: 100 }), { acceptExceeding: true, stalenessMs: DEFAULT_TIMING.stalenessMs });
        if (i > 0) samples.push(performance.now() - t0);
        estimated = view.waiting.readyEstimated;
      }
      const target = TARGETS_MS[depth];
      const f = figure({
        scenario: 'console',
        metric: `admin queue refresh at ${depth.toLocaleString('en-US')} ready (p50 of ${REFRESHES})`,
        value: percentile(samples, 50),
        unit: 'ms',
        better: 'lower',
        ...(target ? { target: `≤ ${target} ms` } : {}),
        note: `max ${Math.round(Math.max(...samples))} ms; lane depths ${estimated ? 'estimated beyond the exact bound' : 'exact'}`,
      });
      if (target) f.met = f.value <= target;
      figures.push(f);
      // What one GET /metrics scrape reads from the store at this depth (docs/metrics.md).
      const scrapes: number[] = [];
      for (let i = 0; i <= REFRESHES; i++) {
        const t0 = performance.now();
        await Promise.all([queueLaneDepth(pool), gaugeSnapshotRead(pool), postureRead(pool)]);
        if (i > 0) scrapes.push(performance.now() - t0);
      }
      figures.push(
        figure({
          scenario: 'console',
          metric: `/metrics store reads at ${depth.toLocaleString('en-US')} ready (p50 of ${REFRESHES})`,
          value: percentile(scrapes, 50),
          unit: 'ms',
          better: 'lower',
          note: `max ${Math.round(Math.max(...scrapes))} ms`,
        }),
      );
    }
    return figures;
  } finally {
    await pool.end().catch(() => {});
  }
}
